/* codegen/cuda.c: renders the kernel IR of a graph as CUDA C, one extern "C" __global__ kernel per kernel-IR kernel. */
#include "codegen/codegen.h"
#include "codegen/kir.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define BLOCK 256       /* threads per block of every kernel */
#define MAX_GRID 65535  /* kernels are grid-stride loops: more blocks buy nothing */
#define TILE 16         /* dot_general tile edge (TILE * TILE == BLOCK) */

/* ---------------------------------------------------------------- the device prelude */

/* The prim IR's elementwise semantics on the device, one overload set per prim
 * (pc_<prim name>), so the renderer names prims and C++ overloading picks the
 * dtype: integer arithmetic wraps, x/0 is 0, shifts past the width saturate,
 * max/min propagate NaN, f16/bf16 are computed in float and rounded per prim. */
PC_PRIMS_CHECKED(74); /* a pc_<name> overload set per elementwise prim */
static const char *const prelude[] = {
    "/* primc CUDA prelude: the prim IR's elementwise semantics; f16/bf16 stored as bits, computed in float */",
    "#define PC_D __device__ __forceinline__",
    "#define PC_INF_F __int_as_float(0x7f800000)",
    "#define PC_INF_D __longlong_as_double(0x7ff0000000000000LL)",
    "#define PC_NAN_F __int_as_float(0x7fc00000)",
    "#define PC_NAN_D __longlong_as_double(0x7ff8000000000000LL)",
    "/* set to 3 (PRIMC_ERR_RUNTIME) by a kernel that finds bad data, e.g. a gather index out of range */",
    "__device__ int primc_status;",
    "PC_D float pc_h2f(unsigned short h) { float f; asm(\"cvt.f32.f16 %0, %1;\" : \"=f\"(f) : \"h\"(h)); return f; }",
    "PC_D unsigned short pc_f2h(float f) { unsigned short h; asm(\"cvt.rn.f16.f32 %0, %1;\" : \"=h\"(h) : \"f\"(f)); return h; }",
    "PC_D float pc_bf2f(unsigned short h) { return __uint_as_float((unsigned)h << 16); }",
    "PC_D unsigned short pc_f2bf(float f) {",
    "  unsigned u = __float_as_uint(f);",
    "  if (f != f) return (unsigned short)((u >> 16) | 0x40u);",
    "  return (unsigned short)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);",
    "}",
    "PC_D float pc_rh(float f) { return pc_h2f(pc_f2h(f)); }",
    "PC_D float pc_rbf(float f) { return pc_bf2f(pc_f2bf(f)); }",
    "/* 8-bit floats (ONNX FLOAT8*); kind 0: inf and NaNs (e5m2), 1: no inf, NaN S.1111.111 (e4m3fn), 2: fnuz (NaN 0x80, no -0) */",
    "/* kind 3: f4e2m1, sign bit 0x8, no inf or NaN: saturates, NaN gives the other-signed zero (as ml_dtypes) */",
    "PC_D float pc_f8_to_f(unsigned b, int mbits, int bias, int kind) {",
    "  const unsigned sb = kind == 3 ? 0x8u : 0x80u, mag = b & (sb - 1u), e = mag >> mbits, m = mag & ((1u << mbits) - 1u);",
    "  const float s = (b & sb) ? -1.f : 1.f;",
    "  if (kind != 3 && (kind == 2 ? b == 0x80u : kind == 1 ? mag == 0x7fu : e == (0x7fu >> mbits))) return (kind || m) ? PC_NAN_F : s * PC_INF_F;",
    "  return s * ldexpf(e ? (float)(m | (1u << mbits)) : (float)m, (e ? (int)e : 1) - bias - mbits);",
    "}",
    "/* round to nearest even without saturation; below the smallest normal the FPU's rounding of |f| + 2^k quantizes */",
    "PC_D unsigned char pc_f_to_f8(float f, int mbits, int bias, int kind, unsigned maxc) {",
    "  const unsigned sb = kind == 3 ? 0x8u : 0x80u, u = __float_as_uint(f), a = u & 0x7fffffffu, sign = (u >> 31) ? sb : 0u;",
    "  const unsigned nan = kind == 2 ? 0x80u : kind == 3 ? (sign ^ sb) : sign | (kind == 1 ? 0x7fu : 0x7eu);",
    "  if (a > 0x7f800000u) return (unsigned char)nan;",
    "  const int emin = 1 - bias, shift = 23 - mbits, k = emin - mbits + 23;",
    "  unsigned q;",
    "  if (a < ((unsigned)(emin + 127) << 23)) q = __float_as_uint(__fadd_rn(fabsf(f), ldexpf(1.f, k))) - ((unsigned)(k + 127) << 23);",
    "  else q = ((a + (1u << (shift - 1)) - 1u + ((a >> shift) & 1u)) >> shift) - ((unsigned)(127 - bias) << mbits);",
    "  if (q > maxc) return (unsigned char)(kind == 0 ? (sign | 0x7cu) : kind == 3 ? (sign | maxc) : nan);",
    "  return (unsigned char)(q == 0u && kind == 2 ? 0u : (sign | q));",
    "}",
    "#define PC_F8(n, mb, bias, kind, maxc) \\",
    "  PC_D float pc_##n##_to_f(unsigned char b) { return pc_f8_to_f(b, mb, bias, kind); } \\",
    "  PC_D unsigned char pc_f_to_##n(float f) { return pc_f_to_f8(f, mb, bias, kind, maxc); } \\",
    "  PC_D float pc_r##n(float f) { return pc_##n##_to_f(pc_f_to_##n(f)); }",
    "PC_F8(f8e4m3fn, 3, 7, 1, 0x7eu) PC_F8(f8e4m3fnuz, 3, 8, 2, 0x7fu) PC_F8(f8e5m2, 2, 15, 0, 0x7bu) PC_F8(f8e5m2fnuz, 2, 16, 2, 0x7fu)",
    "PC_F8(f4e2m1, 1, 1, 3, 0x7u)",
    "/* f8e8m0: 2^(b-127), 0xff NaN; stores keep the f32 exponent field (sign dropped, inf and NaN give NaN) */",
    "PC_D float pc_f8e8m0_to_f(unsigned b) { return b == 0xffu ? PC_NAN_F : __uint_as_float(b ? b << 23 : 0x400000u); }",
    "PC_D unsigned char pc_f_to_f8e8m0(float f) { return (unsigned char)(__float_as_uint(f) >> 23); }",
    "PC_D float pc_rf8e8m0(float f) { return pc_f8e8m0_to_f(pc_f_to_f8e8m0(f)); }",
    "/* sub-byte ints, held one per byte: every result wraps to the width */",
    "PC_D signed char pc_wrap_i4(long long v) { return (signed char)(((v & 15) ^ 8) - 8); }",
    "PC_D unsigned char pc_wrap_u4(long long v) { return (unsigned char)(v & 15); }",
    "PC_D signed char pc_wrap_i2(long long v) { return (signed char)(((v & 3) ^ 2) - 2); }",
    "PC_D unsigned char pc_wrap_u2(long long v) { return (unsigned char)(v & 3); }",
    "template <class T> struct pc_ut { typedef T t; enum { s = 0 }; };",
    "template <> struct pc_ut<signed char> { typedef unsigned int t; enum { s = 1 }; };",
    "template <> struct pc_ut<short> { typedef unsigned int t; enum { s = 1 }; };",
    "template <> struct pc_ut<int> { typedef unsigned int t; enum { s = 1 }; };",
    "template <> struct pc_ut<long long> { typedef unsigned long long t; enum { s = 1 }; };",
    "template <> struct pc_ut<unsigned char> { typedef unsigned int t; enum { s = 0 }; };",
    "template <> struct pc_ut<unsigned short> { typedef unsigned int t; enum { s = 0 }; };",
    "#define PC_U(T) typename pc_ut<T>::t",
    "template <class T> PC_D T pc_add(T a, T b) { return (T)((PC_U(T))a + (PC_U(T))b); }",
    "template <class T> PC_D T pc_sub(T a, T b) { return (T)((PC_U(T))a - (PC_U(T))b); }",
    "template <class T> PC_D T pc_mul(T a, T b) { return (T)((PC_U(T))a * (PC_U(T))b); }",
    "template <class T> PC_D T pc_neg(T a) { return (T)((PC_U(T))0 - (PC_U(T))a); }",
    "PC_D float pc_neg(float a) { return -a; }",
    "PC_D double pc_neg(double a) { return -a; }",
    "template <class T> PC_D T pc_div(T a, T b) {",
    "  if (b == (T)0) return (T)0;",
    "  if (pc_ut<T>::s && b == (T)-1) return pc_neg(a);",
    "  return (T)(a / b);",
    "}",
    "template <class T> PC_D T pc_rem(T a, T b) {",
    "  if (b == (T)0 || (pc_ut<T>::s && b == (T)-1)) return (T)0;",
    "  return (T)(a % b);",
    "}",
    "PC_D float pc_div(float a, float b) { return a / b; }",
    "PC_D double pc_div(double a, double b) { return a / b; }",
    "PC_D float pc_rem(float a, float b) { return fmodf(a, b); }",
    "PC_D double pc_rem(double a, double b) { return fmod(a, b); }",
    "PC_D long long pc_ipow(long long b, long long e) {",
    "  if (e < 0) return b == 1 ? 1 : b == -1 ? ((e & 1) ? -1 : 1) : 0;",
    "  unsigned long long r = 1, x = (unsigned long long)b;",
    "  for (; e; e >>= 1, x *= x)",
    "    if (e & 1) r *= x;",
    "  return (long long)r;",
    "}",
    "template <class T> PC_D T pc_pow(T a, T b) { return (T)pc_ipow((long long)a, (long long)b); }",
    "PC_D float pc_pow(float a, float b) { return powf(a, b); }",
    "PC_D double pc_pow(double a, double b) { return pow(a, b); }",
    "template <class T> PC_D T pc_max(T a, T b) { return a > b ? a : b; }",
    "template <class T> PC_D T pc_min(T a, T b) { return a < b ? a : b; }",
    "PC_D float pc_max(float a, float b) { return (a != a || b != b) ? a + b : fmaxf(a, b); }",
    "PC_D float pc_min(float a, float b) { return (a != a || b != b) ? a + b : fminf(a, b); }",
    "PC_D double pc_max(double a, double b) { return (a != a || b != b) ? a + b : fmax(a, b); }",
    "PC_D double pc_min(double a, double b) { return (a != a || b != b) ? a + b : fmin(a, b); }",
    "template <class T> PC_D T pc_clamp(T x, T lo, T hi) { return pc_min(pc_max(x, lo), hi); }",
    "template <class T> PC_D T pc_where(unsigned char c, T a, T b) { return c ? a : b; }",
    "template <class T> PC_D T pc_abs(T a) { return a < (T)0 ? pc_neg(a) : a; }",
    "PC_D unsigned char pc_abs(unsigned char a) { return a; }",
    "PC_D float pc_abs(float a) { return fabsf(a); }",
    "PC_D double pc_abs(double a) { return fabs(a); }",
    "template <class T> PC_D T pc_sign(T a) { return (T)((a > (T)0) - (a < (T)0)); }",
    "PC_D unsigned char pc_sign(unsigned char a) { return (unsigned char)(a != 0); }",
    "PC_D float pc_sign(float a) { return a > 0.f ? 1.f : a < 0.f ? -1.f : a; }",
    "PC_D double pc_sign(double a) { return a > 0. ? 1. : a < 0. ? -1. : a; }",
    "template <class T> PC_D T pc_not(T a) { return (T)~a; }",
    "PC_D unsigned char pc_lnot(unsigned char a) { return (unsigned char)(a ^ 1u); }",
    "template <class T> PC_D T pc_and(T a, T b) { return (T)(a & b); }",
    "template <class T> PC_D T pc_or(T a, T b) { return (T)(a | b); }",
    "template <class T> PC_D T pc_xor(T a, T b) { return (T)(a ^ b); }",
    "template <class T> PC_D T pc_bitwise_and(T a, T b) { return (T)(a & b); }",
    "template <class T> PC_D T pc_bitwise_or(T a, T b) { return (T)(a | b); }",
    "template <class T> PC_D T pc_bitwise_xor(T a, T b) { return (T)(a ^ b); }",
    "template <class T> PC_D T pc_shift_left(T a, T b) {",
    "  if ((PC_U(T))b >= (PC_U(T))(sizeof(T) * 8)) return (T)0;",
    "  return (T)((PC_U(T))a << (PC_U(T))b);",
    "}",
    "template <class T> PC_D T pc_shift_right(T a, T b) {",
    "  if ((PC_U(T))b >= (PC_U(T))(sizeof(T) * 8)) return pc_ut<T>::s ? (T)(a >> (sizeof(T) * 8 - 1)) : (T)0;",
    "  return (T)(a >> b);",
    "}",
    "template <class T> PC_D unsigned char pc_eq(T a, T b) { return (unsigned char)(a == b); }",
    "template <class T> PC_D unsigned char pc_ne(T a, T b) { return (unsigned char)(a != b); }",
    "template <class T> PC_D unsigned char pc_lt(T a, T b) { return (unsigned char)(a < b); }",
    "template <class T> PC_D unsigned char pc_le(T a, T b) { return (unsigned char)(a <= b); }",
    "template <class T> PC_D unsigned char pc_gt(T a, T b) { return (unsigned char)(a > b); }",
    "template <class T> PC_D unsigned char pc_ge(T a, T b) { return (unsigned char)(a >= b); }",
    "PC_D unsigned char pc_isnan(float a) { return (unsigned char)(a != a); }",
    "PC_D unsigned char pc_isnan(double a) { return (unsigned char)(a != a); }",
    "PC_D unsigned char pc_isinf(float a) { return (unsigned char)(fabsf(a) == PC_INF_F); }",
    "PC_D unsigned char pc_isinf(double a) { return (unsigned char)(fabs(a) == PC_INF_D); }",
    "#define PC_F1(n, ff, fd) PC_D float pc_##n(float a) { return ff(a); } PC_D double pc_##n(double a) { return fd(a); }",
    "PC_F1(exp, expf, exp) PC_F1(log, logf, log) PC_F1(log1p, log1pf, log1p) PC_F1(expm1, expm1f, expm1)",
    "PC_F1(sqrt, sqrtf, sqrt) PC_F1(sin, sinf, sin) PC_F1(cos, cosf, cos) PC_F1(tan, tanf, tan)",
    "PC_F1(tanh, tanhf, tanh) PC_F1(erf, erff, erf) PC_F1(floor, floorf, floor) PC_F1(ceil, ceilf, ceil)",
    "PC_F1(round, rintf, rint)",
    "PC_D float pc_rsqrt(float a) { return 1.0f / sqrtf(a); }",
    "PC_D double pc_rsqrt(double a) { return 1.0 / sqrt(a); }",
    "PC_D float pc_reciprocal(float a) { return 1.0f / a; }",
    "PC_D double pc_reciprocal(double a) { return 1.0 / a; }",
    "PC_D float pc_sigmoid(float a) { return 1.0f / (1.0f + expf(-a)); }",
    "PC_D double pc_sigmoid(double a) { return 1.0 / (1.0 + exp(-a)); }",
    "PC_D float pc_atan2(float a, float b) { return atan2f(a, b); }",
    "PC_D double pc_atan2(double a, double b) { return atan2(a, b); }",
    "/* reductions: one block per output row, warp shuffles then one slot per warp in shared memory */",
    "struct pc_f_sum { template <class T> PC_D T operator()(T a, T b) const { return pc_add(a, b); } };",
    "struct pc_f_prod { template <class T> PC_D T operator()(T a, T b) const { return pc_mul(a, b); } };",
    "struct pc_f_max { template <class T> PC_D T operator()(T a, T b) const { return pc_max(a, b); } };",
    "struct pc_f_min { template <class T> PC_D T operator()(T a, T b) const { return pc_min(a, b); } };",
    "template <class T, class F> __device__ T pc_block_reduce(T v, T *sh, T id, F f) {",
    "  for (int o = 16; o > 0; o >>= 1) v = f(v, __shfl_down_sync(0xffffffffu, v, o));",
    "  const int lane = threadIdx.x & 31, w = threadIdx.x >> 5, nw = (blockDim.x + 31) >> 5;",
    "  __syncthreads();",
    "  if (lane == 0) sh[w] = v;",
    "  __syncthreads();",
    "  if (w == 0) {",
    "    v = lane < nw ? sh[lane] : id;",
    "    for (int o = 16; o > 0; o >>= 1) v = f(v, __shfl_down_sync(0xffffffffu, v, o));",
    "  }",
    "  return v; /* the block's result in thread 0 */",
    "}",
    "/* argmax/argmin candidates (value, linear reduced index; -1: none): NaN wins, first NaN kept */",
    "template <class T> PC_D bool pc_arg_better(T x, long long xi, T b, long long bi, bool mx, bool last) {",
    "  if (xi < 0) return false;",
    "  if (bi < 0) return true;",
    "  const bool xn = x != x, bn = b != b;",
    "  if (xn || bn) return xn && (!bn || xi < bi);",
    "  if (x == b) return last ? xi > bi : xi < bi;",
    "  return mx ? x > b : x < b;",
    "}",
    "template <class T> __device__ void pc_warp_arg(T &v, long long &i, bool mx, bool last) {",
    "  for (int o = 16; o > 0; o >>= 1) {",
    "    const T v2 = __shfl_down_sync(0xffffffffu, v, o);",
    "    const long long i2 = __shfl_down_sync(0xffffffffu, i, o);",
    "    if (pc_arg_better(v2, i2, v, i, mx, last)) v = v2, i = i2;",
    "  }",
    "}",
    "template <class T> __device__ void pc_block_arg(T &v, long long &i, T *sh, long long *shi, bool mx, bool last) {",
    "  pc_warp_arg(v, i, mx, last);",
    "  const int lane = threadIdx.x & 31, w = threadIdx.x >> 5, nw = (blockDim.x + 31) >> 5;",
    "  __syncthreads();",
    "  if (lane == 0) sh[w] = v, shi[w] = i;",
    "  __syncthreads();",
    "  if (w == 0) {",
    "    i = lane < nw ? shi[lane] : -1LL;",
    "    v = lane < nw ? sh[lane] : v;",
    "    pc_warp_arg(v, i, mx, last);",
    "  }",
    "}",
    "/* Philox4x32-10 with counter (c0, c1, 0, 0), as the interpreter draws element c of random */",
    "PC_D void pc_philox(unsigned x0, unsigned x1, unsigned k0, unsigned k1, unsigned *o) {",
    "  unsigned x2 = 0, x3 = 0;",
    "  for (int r = 0; r < 10; r++) {",
    "    const unsigned long long p0 = 0xD2511F53ull * x0, p1 = 0xCD9E8D57ull * x2;",
    "    const unsigned y0 = (unsigned)(p1 >> 32) ^ x1 ^ k0, y2 = (unsigned)(p0 >> 32) ^ x3 ^ k1;",
    "    x1 = (unsigned)p1, x3 = (unsigned)p0, x0 = y0, x2 = y2;",
    "    k0 += 0x9E3779B9u, k1 += 0xBB67AE85u;",
    "  }",
    "  o[0] = x0, o[1] = x1, o[2] = x2, o[3] = x3;",
    "}",
    "PC_D double pc_unit(unsigned hi, unsigned lo) { return (double)((((unsigned long long)hi << 32) | lo) >> 11) * (1.0 / 9007199254740992.0); }",
    "#define PC_GRID_STRIDE(i, n) for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < (n); i += (long long)gridDim.x * blockDim.x)",
};

/* ---------------------------------------------------------------- dtypes */

typedef struct cu_dtype {
  const char *mem;    /* storage element type */
  const char *reg;    /* register type: f16/bf16 computed in float */
  const char *acc;    /* reduction accumulator (small ints widened: sums wrap the same way) */
  const char *lo, *hi;/* the dtype's range, in the accumulator type */
} cu_dtype;

static const cu_dtype cu_types[PC_DTYPE_COUNT] = {
    [PC_f16] = {"unsigned short", "float", "float", "-PC_INF_F", "PC_INF_F"},
    [PC_bf16] = {"unsigned short", "float", "float", "-PC_INF_F", "PC_INF_F"},
    [PC_f32] = {"float", "float", "float", "-PC_INF_F", "PC_INF_F"},
    [PC_f64] = {"double", "double", "double", "-PC_INF_D", "PC_INF_D"},
    [PC_i8] = {"signed char", "signed char", "int", "-128", "127"},
    [PC_i16] = {"short", "short", "int", "-32768", "32767"},
    [PC_i32] = {"int", "int", "int", "(-2147483647 - 1)", "2147483647"},
    [PC_i64] = {"long long", "long long", "long long", "(-9223372036854775807LL - 1)", "9223372036854775807LL"},
    [PC_u8] = {"unsigned char", "unsigned char", "unsigned int", "0u", "255u"},
    [PC_bool] = {"unsigned char", "unsigned char", "unsigned int", "0u", "1u"},
    [PC_c64] = {"unsigned long long", "unsigned long long", NULL, "0", "0"}, /* moved as 64-bit patterns */
    [PC_u16] = {"unsigned short", "unsigned short", "unsigned int", "0u", "65535u"},
    [PC_u32] = {"unsigned int", "unsigned int", "unsigned int", "0u", "4294967295u"},
    [PC_u64] = {"unsigned long long", "unsigned long long", "unsigned long long", "0ull", "18446744073709551615ull"},
    [PC_f8e4m3fn] = {"unsigned char", "float", "float", "-PC_INF_F", "PC_INF_F"},
    [PC_f8e4m3fnuz] = {"unsigned char", "float", "float", "-PC_INF_F", "PC_INF_F"},
    [PC_f8e5m2] = {"unsigned char", "float", "float", "-PC_INF_F", "PC_INF_F"},
    [PC_f8e5m2fnuz] = {"unsigned char", "float", "float", "-PC_INF_F", "PC_INF_F"},
    [PC_i4] = {"signed char", "signed char", "int", "-8", "7"},
    [PC_u4] = {"unsigned char", "unsigned char", "unsigned int", "0u", "15u"},
    [PC_i2] = {"signed char", "signed char", "int", "-2", "1"},
    [PC_u2] = {"unsigned char", "unsigned char", "unsigned int", "0u", "3u"},
    [PC_f4e2m1] = {"unsigned char", "float", "float", "-PC_INF_F", "PC_INF_F"},
    [PC_f8e8m0] = {"unsigned char", "float", "float", "-PC_INF_F", "PC_INF_F"},
};

/* floats stored narrower than computed: the prelude's load (bits -> float), store (float -> bits) and
 * round (float -> nearest storable float) functions */
typedef struct cu_narrow {
  const char *load, *store, *round;
} cu_narrow;

static const cu_narrow cu_narrows[PC_DTYPE_COUNT] = {
    [PC_f16] = {"pc_h2f", "pc_f2h", "pc_rh"},
    [PC_bf16] = {"pc_bf2f", "pc_f2bf", "pc_rbf"},
    [PC_f8e4m3fn] = {"pc_f8e4m3fn_to_f", "pc_f_to_f8e4m3fn", "pc_rf8e4m3fn"},
    [PC_f8e4m3fnuz] = {"pc_f8e4m3fnuz_to_f", "pc_f_to_f8e4m3fnuz", "pc_rf8e4m3fnuz"},
    [PC_f8e5m2] = {"pc_f8e5m2_to_f", "pc_f_to_f8e5m2", "pc_rf8e5m2"},
    [PC_f8e5m2fnuz] = {"pc_f8e5m2fnuz_to_f", "pc_f_to_f8e5m2fnuz", "pc_rf8e5m2fnuz"},
    [PC_f4e2m1] = {"pc_f4e2m1_to_f", "pc_f_to_f4e2m1", "pc_rf4e2m1"},
    [PC_f8e8m0] = {"pc_f8e8m0_to_f", "pc_f_to_f8e8m0", "pc_rf8e8m0"},
};

static int is_half(pc_dtype t) { return cu_narrows[t].load != NULL; }

/* the prelude's wrap of a sub-byte int type (applied to every result and store), else NULL */
static const char *wrap_fn(pc_dtype t) {
  static const char *const fns[PC_DTYPE_COUNT] = {[PC_i4] = "pc_wrap_i4", [PC_u4] = "pc_wrap_u4", [PC_i2] = "pc_wrap_i2",
                                                  [PC_u2] = "pc_wrap_u2"};
  return fns[t];
}

/* an unsigned type of an element's byte size, for copies that move bits */
static const char *bits_type(size_t size) {
  return size == 8 ? "unsigned long long" : size == 4 ? "unsigned int" : size == 2 ? "unsigned short" : "unsigned char";
}

/* ---------------------------------------------------------------- render context */

typedef struct cctx {
  const kir_program *p;
  pc_graph *g;
  FILE *f;
  int tmp;                /* next temporary */
  int idx;                /* kernel being rendered */
  char name[96];          /* its symbol */
  pc_cuda_launch *launch; /* its launch */
} cctx;

static void line(cctx *C, int ind, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void line(cctx *C, int ind, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(C->f, "%*s", 2 * ind, "");
  vfprintf(C->f, fmt, ap);
  fputc('\n', C->f);
  va_end(ap);
}

static int64_t clamp_grid(int64_t work, int64_t per_block) {
  int64_t b = (work + per_block - 1) / per_block;
  return b < 1 ? 1 : b > MAX_GRID ? MAX_GRID : b;
}

static pc_status fail_kernel(cctx *C, const char *fmt, const char *what) {
  const kir_kernel *k = &C->p->kernels[C->idx];
  if (k->n_nodes) return pc_node_fail(C->g, k->nodes[0], PC_ERR_UNSUPPORTED, fmt, what);
  char msg[256];
  snprintf(msg, sizeof msg, fmt, what);
  return pc_fail(C->g, PC_ERR_UNSUPPORTED, "kernel %s: %s", C->name, msg);
}

/* ---------------------------------------------------------------- expressions */

static void put_map(cctx *C, const kir_map *m, int n_loops) {
  fprintf(C->f, "(%lldLL", (long long)m->offset);
  for (int k = 0; k < n_loops; k++)
    if (m->stride[k]) fprintf(C->f, " + %lldLL * i%d", (long long)m->stride[k], k);
  fprintf(C->f, ")");
}

/* bN, cast when the access's dtype is not the buffer's */
static void put_buf(cctx *C, int buf, pc_dtype t) {
  if (C->p->bufs[buf].dtype == t) fprintf(C->f, "b%d", buf);
  else fprintf(C->f, "((%s *)b%d)", cu_types[t].mem, buf);
}

static void put_int(FILE *f, pc_dtype t, int64_t v) {
  if (v == INT64_MIN) fprintf(f, "(%s)(-9223372036854775807LL - 1)", cu_types[t].reg);
  else fprintf(f, "(%s)%lldLL", cu_types[t].reg, (long long)v);
}

static void put_float(FILE *f, pc_dtype t, double v) {
  const char *sfx = cu_types[t].reg[0] == 'd' ? "D" : "F";
  if (isnan(v)) fprintf(f, "PC_NAN_%s", sfx);
  else if (isinf(v)) fprintf(f, "%sPC_INF_%s", v < 0 ? "-" : "", sfx);
  else fprintf(f, "(%s)%.17g", cu_types[t].reg, v);
}

/* from -> to with the IR's rules: nonzero is true, half results rounded */
static void put_convert(cctx *C, pc_dtype to, pc_dtype from, const char *x) {
  (void)from;
  if (to == PC_bool) fprintf(C->f, "(unsigned char)(%s != 0)", x);
  else if (is_half(to)) fprintf(C->f, "%s((float)(%s))", cu_narrows[to].round, x);
  else if (wrap_fn(to)) fprintf(C->f, "%s((long long)(%s))", wrap_fn(to), x);
  else fprintf(C->f, "(%s)(%s)", cu_types[to].reg, x);
}

static void put_rounded_open(cctx *C, pc_dtype t) {
  if (is_half(t)) fprintf(C->f, "%s(", cu_narrows[t].round);
  if (wrap_fn(t)) fprintf(C->f, "%s(", wrap_fn(t));
}

/* one temporary per expression node, in evaluation order; returns its number */
static int emit_expr(cctx *C, const kir_expr *e, int n_loops, int ind) {
  int a[3] = {0};
  for (int i = 0; i < e->n_args; i++) a[i] = emit_expr(C, e->args[i], n_loops, ind);
  int t = C->tmp++;
  fprintf(C->f, "%*sconst %s t%d = ", 2 * ind, "", cu_types[e->dtype].reg, t);
  char x[32];
  switch (e->kind) { /* the renderer's one walk over expression kinds */
  case KE_LOAD:
    if (is_half(e->dtype)) fprintf(C->f, "%s(", cu_narrows[e->dtype].load);
    put_buf(C, e->buf, e->dtype);
    fprintf(C->f, "[");
    put_map(C, &e->map, n_loops);
    fprintf(C->f, "]%s", is_half(e->dtype) ? ")" : "");
    break;
  case KE_CONST:
    if (pc_dtype_is_float(e->dtype)) put_float(C->f, e->dtype, e->c);
    else put_int(C->f, e->dtype, e->ci);
    break;
  case KE_INDEX: {
    char *buf = NULL;
    size_t len = 0;
    FILE *save = C->f, *mf = open_memstream(&buf, &len);
    if (!mf) return t;
    C->f = mf;
    put_map(C, &e->map, n_loops);
    fclose(mf);
    C->f = save;
    put_convert(C, e->dtype, PC_i64, buf ? buf : "0");
    free(buf);
    break;
  }
  case KE_CONVERT:
    snprintf(x, sizeof x, "t%d", a[0]);
    put_convert(C, e->dtype, e->args[0]->dtype, x);
    break;
  case KE_PRIM: {
    int lnot = e->op == PC_OP_not && e->dtype == PC_bool;
    put_rounded_open(C, e->dtype);
    fprintf(C->f, "pc_%s(", lnot ? "lnot" : pc_prim(e->op)->name);
    for (int i = 0; i < e->n_args; i++) fprintf(C->f, "%st%d", i ? ", " : "", a[i]);
    fprintf(C->f, ")%s", is_half(e->dtype) || wrap_fn(e->dtype) ? ")" : "");
    break;
  }
  }
  fprintf(C->f, ";\n");
  return t;
}

/* the value v (register type of dtype t) as stored in memory */
static void put_store(cctx *C, int ind, const kir_store *s, pc_dtype t, const char *v, int n_loops) {
  fprintf(C->f, "%*s", 2 * ind, "");
  put_buf(C, s->buf, t);
  fprintf(C->f, "[");
  put_map(C, &s->map, n_loops);
  if (is_half(t)) fprintf(C->f, "] = %s(%s);\n", cu_narrows[t].store, v);
  else if (wrap_fn(t)) fprintf(C->f, "] = %s(%s);\n", wrap_fn(t), v); /* reduction accumulators are wider */
  else fprintf(C->f, "] = (%s)(%s);\n", cu_types[t].mem, v);
}

static int expr_supported(const kir_expr *e) {
  if (e->dtype == PC_c64 && e->kind != KE_LOAD) return 0;
  for (int i = 0; i < e->n_args; i++)
    if (!expr_supported(e->args[i])) return 0;
  return 1;
}

/* ---------------------------------------------------------------- loop kernels */

static void mark_loads(const kir_expr *e, char *used) {
  if (e->kind == KE_LOAD) used[e->buf] |= 1;
  for (int i = 0; i < e->n_args; i++) mark_loads(e->args[i], used);
}

/* signature: every buffer the kernel touches, by id; the launch passes the same list */
static pc_status loop_signature(cctx *C, const kir_kernel *k) {
  const kir_program *p = C->p;
  char *used = calloc((size_t)p->n_bufs + 1, 1);
  if (!used) return pc_fail(C->g, PC_ERR_NOMEM, "out of memory");
  for (int s = 0; s < k->n_stores; s++) {
    used[k->stores[s].buf] |= 2;
    mark_loads(k->stores[s].value, used);
  }
  int n = 0;
  for (int b = 0; b < p->n_bufs; b++) n += used[b] != 0;
  int *args = pc_alloc(C->g, sizeof(int) * (size_t)(n + 1));
  if (!args) {
    free(used);
    return pc_fail(C->g, PC_ERR_NOMEM, "out of memory");
  }
  fprintf(C->f, "extern \"C\" __global__ void __launch_bounds__(%d) %s(", BLOCK, C->name);
  n = 0;
  for (int b = 0; b < p->n_bufs; b++) {
    if (!used[b]) continue;
    fprintf(C->f, "%s%s%s *b%d", n ? ", " : "", used[b] & 2 ? "" : "const ", cu_types[p->bufs[b].dtype].mem, b);
    args[n++] = b;
  }
  fprintf(C->f, ") {\n");
  C->launch->n_args = n;
  C->launch->args = args;
  free(used);
  return PC_OK;
}

/* i<first>..i<last-1> from the linear index `lin` (row-major over the loops' extents) */
static void decompose(cctx *C, int ind, const kir_kernel *k, int first, int last, const char *lin) {
  line(C, ind, "long long r_ = %s;", lin);
  for (int l = last - 1; l > first; l--) {
    line(C, ind, "const long long i%d = r_ %% %lldLL;", l, (long long)k->extent[l]);
    line(C, ind, "r_ /= %lldLL;", (long long)k->extent[l]);
  }
  line(C, ind, "const long long i%d = r_;", first);
}

static int64_t extent_product(const kir_kernel *k, int first, int last) {
  int64_t n = 1;
  for (int l = first; l < last; l++) n *= k->extent[l];
  return n;
}

/* out[map(i)] = expr(i) over all loops, one thread per point */
static pc_status render_pointwise(cctx *C, const kir_kernel *k) {
  int64_t total = extent_product(k, 0, k->n_loops);
  C->launch->grid = clamp_grid(total, BLOCK);
  line(C, 1, "PC_GRID_STRIDE(lin, %lldLL) {", (long long)total);
  decompose(C, 2, k, 0, k->n_loops, "lin");
  int t[KIR_MAX_ARGS];
  /* every value before any store: a store may overwrite what another store reads (in place) */
  for (int s = 0; s < k->n_stores; s++) t[s] = emit_expr(C, k->stores[s].value, k->n_loops, 2);
  for (int s = 0; s < k->n_stores; s++) {
    char v[32];
    snprintf(v, sizeof v, "t%d", t[s]);
    put_store(C, 2, &k->stores[s], k->stores[s].value->dtype, v, k->n_loops);
  }
  line(C, 1, "}");
  return PC_OK;
}

static const char *red_functor(kir_red r) {
  static const char *const f[] = {[KR_SUM] = "pc_f_sum", [KR_PROD] = "pc_f_prod", [KR_MAX] = "pc_f_max",
                                  [KR_MIN] = "pc_f_min"};
  return f[r];
}

static void put_red_init(cctx *C, kir_red r, pc_dtype t) {
  const cu_dtype *d = &cu_types[t];
  if (r == KR_SUM || r == KR_ARGMAX || r == KR_ARGMIN) fprintf(C->f, "(%s)0", d->acc);
  else if (r == KR_PROD) fprintf(C->f, "(%s)1", d->acc);
  else fprintf(C->f, "(%s)(%s)", d->acc, r == KR_MAX ? d->lo : d->hi);
}

/* one block per output row (the parallel loops), its threads striding over the reduced loops */
static pc_status render_reduction(cctx *C, const kir_kernel *k) {
  int64_t rows = extent_product(k, 0, k->n_par), red = extent_product(k, k->n_par, k->n_loops);
  C->launch->grid = clamp_grid(rows, 1);
  for (int s = 0; s < k->n_stores; s++) {
    const kir_store *st = &k->stores[s];
    if (st->red == KR_NONE || !cu_types[st->value->dtype].acc)
      return fail_kernel(C, "%s: reduction not supported by the CUDA renderer", kir_red_name(st->red));
    line(C, 1, "__shared__ %s sh%d[32];", cu_types[st->value->dtype].acc, s);
    if (st->red == KR_ARGMAX || st->red == KR_ARGMIN) line(C, 1, "__shared__ long long shi%d[32];", s);
  }
  line(C, 1, "for (long long row = blockIdx.x; row < %lldLL; row += gridDim.x) {", (long long)rows);
  decompose(C, 2, k, 0, k->n_par, "row");
  for (int s = 0; s < k->n_stores; s++) {
    fprintf(C->f, "    %s acc%d = ", cu_types[k->stores[s].value->dtype].acc, s);
    put_red_init(C, k->stores[s].red, k->stores[s].value->dtype);
    fprintf(C->f, ";\n");
    if (k->stores[s].red == KR_ARGMAX || k->stores[s].red == KR_ARGMIN) line(C, 2, "long long ai%d = -1;", s);
  }
  line(C, 2, "for (long long red = threadIdx.x; red < %lldLL; red += blockDim.x) {", (long long)red);
  line(C, 3, "{");
  decompose(C, 4, k, k->n_par, k->n_loops, "red");
  for (int s = 0; s < k->n_stores; s++) {
    const kir_store *st = &k->stores[s];
    const char *acc = cu_types[st->value->dtype].acc;
    int t = emit_expr(C, st->value, k->n_loops, 4);
    if (st->red == KR_ARGMAX || st->red == KR_ARGMIN)
      line(C, 4, "if (pc_arg_better((%s)t%d, red, acc%d, ai%d, %d, %d)) acc%d = (%s)t%d, ai%d = red;", acc, t, s, s,
           st->red == KR_ARGMAX, st->arg_last, s, acc, t, s);
    else line(C, 4, "acc%d = %s()(acc%d, (%s)t%d);", s, red_functor(st->red), s, acc, t);
  }
  line(C, 3, "}");
  line(C, 2, "}");
  for (int s = 0; s < k->n_stores; s++) {
    const kir_store *st = &k->stores[s];
    pc_dtype t = st->value->dtype;
    char v[160];
    if (st->red == KR_ARGMAX || st->red == KR_ARGMIN) {
      line(C, 2, "pc_block_arg(acc%d, ai%d, sh%d, shi%d, %d, %d);", s, s, s, s, st->red == KR_ARGMAX, st->arg_last);
      /* the linear reduced index back to the index along the arg loop */
      int64_t div = extent_product(k, st->arg_loop + 1, k->n_loops);
      snprintf(v, sizeof v, "ai%d < 0 ? 0LL : (ai%d / %lldLL) %% %lldLL", s, s, (long long)div,
               (long long)k->extent[st->arg_loop]);
      t = PC_i64;
    } else {
      fprintf(C->f, "    acc%d = pc_block_reduce(acc%d, sh%d, ", s, s, s);
      put_red_init(C, st->red, t);
      fprintf(C->f, ", %s());\n", red_functor(st->red));
      snprintf(v, sizeof v, "acc%d", s);
    }
    line(C, 2, "if (threadIdx.x == 0) {");
    put_store(C, 3, st, t, v, k->n_par);
    line(C, 2, "}");
  }
  line(C, 1, "}");
  return PC_OK;
}

static pc_status render_loop(cctx *C, const kir_kernel *k) {
  for (int s = 0; s < k->n_stores; s++)
    if (!expr_supported(k->stores[s].value)) return fail_kernel(C, "%s: c64 arithmetic is not supported by the CUDA renderer", "c64");
  pc_status st = loop_signature(C, k);
  if (st != PC_OK) return st;
  C->launch->block = BLOCK;
  st = k->n_loops > k->n_par ? render_reduction(C, k) : render_pointwise(C, k);
  fprintf(C->f, "}\n");
  return st;
}

/* ---------------------------------------------------------------- runtime-call kernels */

/* a shape as kir lays it out in params: rank then 8 dims */
typedef struct shp {
  int rank;
  int64_t d[PC_MAX_RANK];
} shp;

static const int64_t *get_shape(const int64_t *q, shp *s) {
  s->rank = (int)q[0];
  for (int i = 0; i < PC_MAX_RANK; i++) s->d[i] = q[1 + i];
  return q + 1 + PC_MAX_RANK;
}

static int64_t numel(const shp *s) {
  int64_t n = 1;
  for (int i = 0; i < s->rank; i++) n *= s->d[i];
  return n;
}

/* row-major strides, as a C initializer list */
static void put_strides(cctx *C, const char *name, const shp *s) {
  int64_t st[PC_MAX_RANK], acc = 1;
  for (int d = s->rank - 1; d >= 0; d--) st[d] = acc, acc *= s->d[d];
  fprintf(C->f, "  const long long %s[%d] = {", name, s->rank ? s->rank : 1);
  for (int d = 0; d < s->rank; d++) fprintf(C->f, "%s%lldLL", d ? ", " : "", (long long)st[d]);
  fprintf(C->f, "%s};\n", s->rank ? "" : "0");
}

static void put_dims(cctx *C, const char *name, const shp *s) {
  fprintf(C->f, "  const long long %s[%d] = {", name, s->rank ? s->rank : 1);
  for (int d = 0; d < s->rank; d++) fprintf(C->f, "%s%lldLL", d ? ", " : "", (long long)s->d[d]);
  fprintf(C->f, "%s};\n", s->rank ? "" : "1");
}

/* the call's buffers as byte pointers a0.. (outputs first), launch args k->args */
static void call_signature(cctx *C, const kir_kernel *k, int block, int64_t grid) {
  fprintf(C->f, "extern \"C\" __global__ void __launch_bounds__(%d) %s(", block, C->name);
  for (int i = 0; i < k->n_args; i++) fprintf(C->f, "%sunsigned char *a%d", i ? ", " : "", i);
  fprintf(C->f, ") {\n");
  C->launch->n_args = k->n_args;
  C->launch->args = k->args;
  C->launch->block = block;
  C->launch->grid = grid;
}

/* load of element i of a typed pointer as the accumulator type */
static const char *load_fn(pc_dtype t) { return is_half(t) ? cu_narrows[t].load : ""; }
static const char *store_fn(pc_dtype t) { return is_half(t) ? cu_narrows[t].store : wrap_fn(t) ? wrap_fn(t) : ""; }

/* copy: dst = src in the widest words that divide the size */
static pc_status render_copy(cctx *C, const kir_kernel *k) {
  shp s;
  get_shape(k->params + 1, &s);
  int64_t bytes = numel(&s) * (int64_t)pc_dtype_size((pc_dtype)k->params[0]);
  size_t w = bytes % 8 == 0 ? 8 : bytes % 4 == 0 ? 4 : bytes % 2 == 0 ? 2 : 1;
  call_signature(C, k, BLOCK, clamp_grid(bytes / (int64_t)w, BLOCK));
  line(C, 1, "if (a0 == a1) return;");
  line(C, 1, "PC_GRID_STRIDE(i, %lldLL) ((%s *)a0)[i] = ((const %s *)a1)[i];", (long long)(bytes / (int64_t)w),
       bits_type(w), bits_type(w));
  fprintf(C->f, "}\n");
  return PC_OK;
}

/* dot_general: [dtype, B, M, N, K, a_sb, a_sm, a_sk, b_sb, b_sk, b_sn], out contiguous [B, M, N];
 * TILE x TILE output tiles, the A and B panels staged through shared memory */
static pc_status render_dot(cctx *C, const kir_kernel *k) {
  const int64_t *q = k->params;
  pc_dtype dt = (pc_dtype)q[0];
  long long B = q[1], M = q[2], N = q[3], K = q[4];
  if (!cu_types[dt].acc) return fail_kernel(C, "dot_general on %s is not supported by the CUDA renderer", pc_dtype_name(dt));
  int fl = pc_dtype_is_float(dt);
  const char *acc = !fl ? "unsigned long long" : dt == PC_f64 ? "double" : "float", *T = cu_types[dt].mem;
  long long tm = (M + TILE - 1) / TILE, tn = (N + TILE - 1) / TILE;
  call_signature(C, k, TILE * TILE, clamp_grid(B * tm * tn, 1));
  const char *cvt = fl ? "" : "(unsigned long long)(long long)";
  line(C, 1, "__shared__ %s sa[%d][%d], sb[%d][%d];", acc, TILE, TILE + 1, TILE, TILE + 1);
  line(C, 1, "%s *o = (%s *)a0;", T, T);
  line(C, 1, "const %s *A = (const %s *)a1, *Bm = (const %s *)a2;", T, T, T);
  line(C, 1, "const int tx = threadIdx.x %% %d, ty = threadIdx.x / %d;", TILE, TILE);
  line(C, 1, "for (long long tile = blockIdx.x; tile < %lldLL; tile += gridDim.x) {", B * tm * tn);
  line(C, 2, "const long long bt = tile / %lldLL, rt = tile %% %lldLL;", tm * tn, tm * tn);
  line(C, 2, "const long long m = rt / %lldLL * %d + ty, n = rt %% %lldLL * %d + tx;", tn, TILE, tn, TILE);
  line(C, 2, "const long long mr = rt / %lldLL * %d + tx;", tn, TILE); /* the A row this thread stages */
  line(C, 2, "%s acc = 0;", acc);
  line(C, 2, "for (long long k0 = 0; k0 < %lldLL; k0 += %d) {", K, TILE);
  /* A panel stored transposed (sa[k][m]) so both panels are read along rows */
  line(C, 3, "sa[ty][tx] = (mr < %lldLL && k0 + ty < %lldLL) ? (%s)%s(%s(A[bt * %lldLL + mr * %lldLL + (k0 + ty) * %lldLL])) : (%s)0;",
       M, K, acc, cvt, load_fn(dt), (long long)q[5], (long long)q[6], (long long)q[7], acc);
  line(C, 3, "sb[ty][tx] = (n < %lldLL && k0 + ty < %lldLL) ? (%s)%s(%s(Bm[bt * %lldLL + (k0 + ty) * %lldLL + n * %lldLL])) : (%s)0;",
       N, K, acc, cvt, load_fn(dt), (long long)q[8], (long long)q[9], (long long)q[10], acc);
  line(C, 3, "__syncthreads();");
  line(C, 3, "for (int kk = 0; kk < %d; kk++) acc += sa[kk][ty] * sb[kk][tx];", TILE);
  line(C, 3, "__syncthreads();");
  line(C, 2, "}");
  line(C, 2, "if (m < %lldLL && n < %lldLL) o[bt * %lldLL + m * %lldLL + n] = %s(%s%s);", M, N, M * N, N, store_fn(dt),
       fl ? "" : "(long long)", "acc");
  line(C, 1, "}");
  fprintf(C->f, "}\n");
  return PC_OK;
}

/* the row-major offset of index variables v0..v{n-1} over dims, parenthesized in Horner form:
 * ((v0 * d1 + v1) * d2 + v2) */
static void put_row_major(cctx *C, const char *v, const int64_t *dims, int n) {
  if (n == 0) {
    fprintf(C->f, "0");
    return;
  }
  for (int d = 1; d < n; d++) fputc('(', C->f);
  fprintf(C->f, "%s0", v);
  for (int d = 1; d < n; d++) fprintf(C->f, " * %lldLL + %s%d)", (long long)dims[d], v, d);
}

/* conv: [dtype, x, w, out shapes, groups, stride, pad_lo, dilation, lhs_dilation (8 each)]; one thread per output */
static pc_status render_conv(cctx *C, const kir_kernel *k) {
  shp x, w, o;
  const int64_t *q = get_shape(get_shape(get_shape(k->params + 1, &x), &w), &o);
  pc_dtype dt = (pc_dtype)k->params[0];
  int64_t groups = *q++;
  const int64_t *stride = q, *pad = q + 8, *dil = q + 16, *ldil = q + 24;
  int S = x.rank - 2, fl = pc_dtype_is_float(dt);
  if (S < 0 || groups < 1 || !cu_types[dt].acc) return fail_kernel(C, "%s: conv operands not supported by the CUDA renderer", "conv");
  const char *acc = !fl ? "unsigned long long" : dt == PC_f64 ? "double" : "float", *T = cu_types[dt].mem;
  int64_t total = numel(&o), Cg = w.d[1], Og = w.d[0] / groups, plane = 1, taps = 1;
  for (int d = 0; d < S; d++) plane *= x.d[2 + d], taps *= w.d[2 + d];
  call_signature(C, k, BLOCK, clamp_grid(total, BLOCK));
  line(C, 1, "%s *out = (%s *)a0;", T, T);
  line(C, 1, "const %s *x = (const %s *)a1, *w = (const %s *)a2;", T, T, T);
  line(C, 1, "PC_GRID_STRIDE(lin, %lldLL) {", (long long)total);
  line(C, 2, "long long r_ = lin;");
  for (int d = S - 1; d >= 0; d--) line(C, 2, "const long long o%d = r_ %% %lldLL; r_ /= %lldLL;", d, (long long)o.d[2 + d], (long long)o.d[2 + d]);
  line(C, 2, "const long long oc = r_ %% %lldLL, n = r_ / %lldLL, g = oc / %lldLL;", (long long)o.d[1], (long long)o.d[1], (long long)Og);
  line(C, 2, "%s acc = 0;", acc);
  line(C, 2, "for (long long ci = 0; ci < %lldLL; ci++) {", (long long)Cg);
  line(C, 3, "const %s *xp = x + (n * %lldLL + g * %lldLL + ci) * %lldLL;", T, (long long)x.d[1], (long long)Cg, (long long)plane);
  line(C, 3, "const %s *wp = w + (oc * %lldLL + ci) * %lldLL;", T, (long long)Cg, (long long)taps);
  for (int d = 0; d < S; d++) {
    line(C, 3 + d, "for (long long k%d = 0; k%d < %lldLL; k%d++) {", d, d, (long long)w.d[2 + d], d);
    line(C, 4 + d, "long long p%d = o%d * %lldLL - %lldLL + k%d * %lldLL;", d, d, (long long)stride[d], (long long)pad[d], d,
         (long long)dil[d]);
    line(C, 4 + d, "if (p%d < 0 || p%d %% %lldLL) continue;", d, d, (long long)ldil[d]);
    line(C, 4 + d, "p%d /= %lldLL;", d, (long long)ldil[d]);
    line(C, 4 + d, "if (p%d >= %lldLL) continue;", d, (long long)x.d[2 + d]);
  }
  fprintf(C->f, "%*sconst long long xi = ", 2 * (3 + S), "");
  put_row_major(C, "p", x.d + 2, S);
  fprintf(C->f, ", wi = ");
  put_row_major(C, "k", w.d + 2, S);
  fprintf(C->f, ";\n");
  if (fl) line(C, 3 + S, "acc += (%s)%s(xp[xi]) * (%s)%s(wp[wi]);", acc, load_fn(dt), acc, load_fn(dt));
  else line(C, 3 + S, "acc += (unsigned long long)(long long)xp[xi] * (unsigned long long)(long long)wp[wi];");
  for (int d = S - 1; d >= 0; d--) line(C, 3 + d, "}");
  line(C, 2, "}");
  line(C, 2, "out[lin] = %s(%s%s);", store_fn(dt), fl ? "" : "(long long)", "acc");
  line(C, 1, "}");
  fprintf(C->f, "}\n");
  return PC_OK;
}

/* an element of dtype t at p[i] read as a double (floats) or a long long (ints) */
static void put_get(cctx *C, pc_dtype t, const char *p, const char *i) {
  if (pc_dtype_is_float(t)) fprintf(C->f, "(double)%s(((const %s *)%s)[%s])", load_fn(t), cu_types[t].mem, p, i);
  else fprintf(C->f, "(long long)((const %s *)%s)[%s]", cu_types[t].mem, p, i);
}

static void put_set(cctx *C, int ind, pc_dtype t, const char *p, const char *i, const char *v) {
  fprintf(C->f, "%*s", 2 * ind, "");
  if (t == PC_bool) fprintf(C->f, "((unsigned char *)%s)[%s] = (unsigned char)((%s) != 0);\n", p, i, v);
  else if (pc_dtype_is_float(t)) fprintf(C->f, "((%s *)%s)[%s] = %s((%s)(%s));\n", cu_types[t].mem, p, i, store_fn(t), is_half(t) ? "float" : cu_types[t].mem, v);
  else fprintf(C->f, "((%s *)%s)[%s] = (%s)(%s);\n", cu_types[t].mem, p, i, cu_types[t].mem, v);
}

/* gather: [dtype, x, idx, out shapes, axis, idx dtype]; bufs out, x, idx; one thread per index.
 * gather_strided: then x's element offset and 8 strides (x read in place, e.g. a broadcast). */
static pc_status render_gather_any(cctx *C, const kir_kernel *k, int strided) {
  shp x, ix, o;
  const int64_t *r = get_shape(get_shape(get_shape(k->params + 1, &x), &ix), &o);
  int axis = (int)r[0];
  pc_dtype idt = (pc_dtype)r[1];
  const char *E = bits_type(pc_dtype_size((pc_dtype)k->params[0]));
  int64_t n = numel(&ix);
  call_signature(C, k, BLOCK, clamp_grid(n, BLOCK));
  put_dims(C, "id", &ix);
  if (strided) {
    fprintf(C->f, "  const long long xs[%d] = {", x.rank ? x.rank : 1);
    for (int d = 0; d < x.rank; d++) fprintf(C->f, "%s%lldLL", d ? ", " : "", (long long)r[3 + d]);
    fprintf(C->f, "%s};\n", x.rank ? "" : "0");
  } else {
    put_strides(C, "xs", &x);
  }
  line(C, 1, "PC_GRID_STRIDE(i, %lldLL) {", (long long)n);
  fprintf(C->f, "    long long j = ");
  put_get(C, idt, "a2", "i");
  fprintf(C->f, ";\n");
  line(C, 2, "if (j < 0) j += %lldLL;", (long long)(x.rank ? x.d[axis] : 1));
  line(C, 2, "if (j < 0 || j >= %lldLL) { primc_status = 3; continue; }", (long long)(x.rank ? x.d[axis] : 1));
  line(C, 2, "long long r_ = i, src = %lldLL;", (long long)(strided ? r[2] : 0));
  line(C, 2, "for (int d = %d; d >= 0; d--) {", ix.rank - 1);
  line(C, 3, "const long long c = r_ %% id[d];");
  line(C, 3, "r_ /= id[d];");
  line(C, 3, "src += (d == %d ? j : c) * xs[d];", axis);
  line(C, 2, "}");
  line(C, 2, "((%s *)a0)[i] = ((const %s *)a1)[src];", E, E);
  line(C, 1, "}");
  fprintf(C->f, "}\n");
  return PC_OK;
}

static pc_status render_gather(cctx *C, const kir_kernel *k) { return render_gather_any(C, k, 0); }
static pc_status render_gather_strided(cctx *C, const kir_kernel *k) { return render_gather_any(C, k, 1); }

/* scatter: [dtype, x, idx, upd, out shapes, axis, idx dtype, mode]; bufs out, x, idx, upd.
 * One thread per line of x along the axis: it copies the line, then applies the
 * updates that land in it in index order, as the CPU kernel does. */
static pc_status render_scatter(cctx *C, const kir_kernel *k) {
  shp x, ix, up, o;
  const int64_t *r = get_shape(get_shape(get_shape(get_shape(k->params + 1, &x), &ix), &up), &o);
  pc_dtype dt = (pc_dtype)k->params[0], idt = (pc_dtype)r[1];
  int axis = (int)r[0], mode = (int)r[2];
  int64_t len = x.rank ? x.d[axis] : 1, lines = len ? numel(&x) / len : 0;
  const char *E = bits_type(pc_dtype_size(dt));
  call_signature(C, k, BLOCK, clamp_grid(lines, BLOCK));
  put_dims(C, "xd", &x);
  put_dims(C, "id", &ix);
  put_strides(C, "xs", &x);
  put_strides(C, "is", &ix);
  put_strides(C, "us", &up);
  line(C, 1, "PC_GRID_STRIDE(l, %lldLL) {", (long long)lines);
  line(C, 2, "long long r_ = l, xo = 0, io = 0, uo = 0;");
  line(C, 2, "bool hit = true;");
  line(C, 2, "for (int d = %d; d >= 0; d--) {", x.rank - 1);
  line(C, 3, "if (d == %d) continue;", axis);
  line(C, 3, "const long long c = r_ %% xd[d];");
  line(C, 3, "r_ /= xd[d];");
  line(C, 3, "xo += c * xs[d], io += c * is[d], uo += c * us[d];");
  line(C, 3, "hit = hit && c < id[d];");
  line(C, 2, "}");
  line(C, 2, "if (a0 != a1)");
  line(C, 3, "for (long long a = 0; a < %lldLL; a++) ((%s *)a0)[xo + a * xs[%d]] = ((const %s *)a1)[xo + a * xs[%d]];",
       (long long)len, E, axis, E, axis);
  line(C, 2, "if (!hit) continue;");
  line(C, 2, "for (long long t = 0; t < %lldLL; t++) {", (long long)(ix.rank ? ix.d[axis] : 1));
  line(C, 3, "const long long ii = io + t * is[%d], ui = uo + t * us[%d];", axis, axis);
  fprintf(C->f, "      long long j = ");
  put_get(C, idt, "a2", "ii");
  fprintf(C->f, ";\n");
  line(C, 3, "if (j < 0) j += %lldLL;", (long long)len);
  line(C, 3, "if (j < 0 || j >= %lldLL) { primc_status = 3; break; }", (long long)len);
  line(C, 3, "const long long di = xo + j * xs[%d];", axis);
  if (mode == 0) {
    line(C, 3, "((%s *)a0)[di] = ((const %s *)a3)[ui];", E, E);
  } else {
    int fl = pc_dtype_is_float(dt);
    const char *V = fl ? "double" : "long long";
    fprintf(C->f, "      const %s a = ", V);
    put_get(C, dt, "a0", "di");
    fprintf(C->f, ", b = ");
    put_get(C, dt, "a3", "ui");
    fprintf(C->f, ";\n");
    static const char *const fops[] = {"", "a + b", "a * b", "fmax(a, b)", "fmin(a, b)"};
    static const char *const iops[] = {"", "(long long)((unsigned long long)a + (unsigned long long)b)",
                                       "(long long)((unsigned long long)a * (unsigned long long)b)", "a > b ? a : b",
                                       "a < b ? a : b"};
    if (mode < 1 || mode > 4) return fail_kernel(C, "%s: unknown scatter reduce", "scatter");
    put_set(C, 3, dt, "a0", "di", fl ? fops[mode] : iops[mode]);
  }
  line(C, 2, "}");
  line(C, 1, "}");
  fprintf(C->f, "}\n");
  return PC_OK;
}

/* outer (dims before axis), len (axis), inner (dims after) */
static void split_axis(const shp *s, int axis, int64_t *outer, int64_t *len, int64_t *inner) {
  *outer = *inner = 1;
  for (int i = 0; i < axis; i++) *outer *= s->d[i];
  for (int i = axis + 1; i < s->rank; i++) *inner *= s->d[i];
  *len = s->rank ? s->d[axis] : 1;
}

/* cumsum: [dtype, x, out shapes, axis, exclusive, reverse]; one thread per line, in double / wrapping int64 */
static pc_status render_cumsum(cctx *C, const kir_kernel *k) {
  shp x, o;
  const int64_t *r = get_shape(get_shape(k->params + 1, &x), &o);
  pc_dtype dt = (pc_dtype)k->params[0];
  int axis = (int)r[0], excl = (int)r[1], rev = (int)r[2], fl = pc_dtype_is_float(dt);
  int64_t outer, len, inner;
  split_axis(&x, axis, &outer, &len, &inner);
  call_signature(C, k, BLOCK, clamp_grid(outer * inner, BLOCK));
  line(C, 1, "PC_GRID_STRIDE(l, %lldLL) {", (long long)(outer * inner));
  line(C, 2, "const long long a = l / %lldLL, c = l %% %lldLL;", (long long)inner, (long long)inner);
  line(C, 2, "%s s = 0;", fl ? "double" : "unsigned long long");
  line(C, 2, "for (long long t = 0; t < %lldLL; t++) {", (long long)len);
  char pos[64];
  if (rev) snprintf(pos, sizeof pos, "(%lldLL - 1 - t)", (long long)len);
  else snprintf(pos, sizeof pos, "t");
  line(C, 3, "const long long i = (a * %lldLL + %s) * %lldLL + c;", (long long)len, pos, (long long)inner);
  fprintf(C->f, "      const %s v = %s", fl ? "double" : "unsigned long long", fl ? "" : "(unsigned long long)");
  put_get(C, dt, "a1", "i");
  fprintf(C->f, ";\n");
  if (!excl) line(C, 3, "s += v;");
  put_set(C, 3, dt, "a0", "i", fl ? "s" : "(long long)s");
  if (excl) line(C, 3, "s += v;");
  line(C, 2, "}");
  line(C, 1, "}");
  fprintf(C->f, "}\n");
  return PC_OK;
}

/* sort / topk: [dtype, x, values, indices shapes, axis, descending, k (-1: all)]; bufs values, indices, x, scratch.
 * One thread per element: its rank in the stable order (NaN last either way) is where it goes. */
static pc_status render_sort(cctx *C, const kir_kernel *k) {
  shp x, vs, is;
  const int64_t *r = get_shape(get_shape(get_shape(k->params + 1, &x), &vs), &is);
  pc_dtype dt = (pc_dtype)k->params[0];
  int axis = (int)r[0], desc = (int)r[1], fl = pc_dtype_is_float(dt);
  if (axis < 0) axis += x.rank;
  int64_t outer, len, inner;
  split_axis(&x, axis, &outer, &len, &inner);
  int64_t kk = r[2] < 0 ? len : r[2];
  const char *V = fl ? "double" : "long long", *E = bits_type(pc_dtype_size(dt));
  call_signature(C, k, BLOCK, clamp_grid(outer * inner * len, BLOCK));
  line(C, 1, "PC_GRID_STRIDE(e, %lldLL) {", (long long)(outer * inner * len));
  line(C, 2, "const long long i = e %% %lldLL, l = e / %lldLL, a = l / %lldLL, c = l %% %lldLL;", (long long)len,
       (long long)len, (long long)inner, (long long)inner);
  line(C, 2, "const long long base = a * %lldLL + c, yi = base + i * %lldLL;", (long long)(len * inner), (long long)inner);
  fprintf(C->f, "    const %s y = ", V);
  put_get(C, dt, "a2", "yi");
  fprintf(C->f, ";\n");
  line(C, 2, "long long rank = 0;");
  line(C, 2, "for (long long j = 0; j < %lldLL; j++) {", (long long)len);
  line(C, 3, "if (j == i) continue;");
  line(C, 3, "const long long zi = base + j * %lldLL;", (long long)inner);
  fprintf(C->f, "      const %s z = ", V);
  put_get(C, dt, "a2", "zi");
  fprintf(C->f, ";\n");
  line(C, 3, "const bool zn = z != z, yn = y != y;");
  line(C, 3, "const int cmp = (zn || yn) ? (int)zn - (int)yn : %s((z > y) - (z < y));", desc ? "-" : "");
  line(C, 3, "rank += cmp < 0 || (cmp == 0 && j < i);");
  line(C, 2, "}");
  line(C, 2, "if (rank < %lldLL) {", (long long)kk);
  line(C, 3, "const long long oi = (a * %lldLL + rank) * %lldLL + c;", (long long)kk, (long long)inner);
  line(C, 3, "((%s *)a0)[oi] = ((const %s *)a2)[yi];", E, E);
  line(C, 3, "((long long *)a1)[oi] = i;");
  line(C, 2, "}");
  line(C, 1, "}");
  fprintf(C->f, "}\n");
  return PC_OK;
}

/* fft: [dtype, in shape, out shape, type (0 fft, 1 ifft, 2 rfft, 3 irfft), length] with numpy's
 * conventions; one thread per output element, a direct DFT in double */
static pc_status render_fft(cctx *C, const kir_kernel *k) {
  shp in, out;
  const int64_t *r = get_shape(get_shape(k->params + 1, &in), &out);
  int type = (int)r[0];
  long long n = r[1], mi = in.rank ? in.d[in.rank - 1] : 1, mo = out.rank ? out.d[out.rank - 1] : 1;
  long long rows = mi ? numel(&in) / mi : 0, m = type == 3 ? n : mi;
  if (type < 0 || type > 3 || n < 1) return fail_kernel(C, "%s: bad fft parameters", "fft");
  int cin = type != 2, cout = type != 3;
  call_signature(C, k, BLOCK, clamp_grid(rows * mo, BLOCK));
  line(C, 1, "PC_GRID_STRIDE(e, %lldLL) {", rows * mo);
  line(C, 2, "const long long row = e / %lldLL, k = e %% %lldLL;", mo, mo);
  line(C, 2, "const float *src = (const float *)a1 + row * %lldLL;", mi * (cin ? 2 : 1));
  line(C, 2, "double sr = 0, si = 0;");
  line(C, 2, "for (long long t = 0; t < %lldLL; t++) {", m < n ? m : n);
  if (type == 3) { /* hermitian extension of the n/2+1 inputs; X[0] and X[n/2] taken real */
    line(C, 3, "const bool up = t > %lldLL;", n / 2);
    line(C, 3, "const long long u = up ? %lldLL - t : t;", n);
    line(C, 3, "double re = u < %lldLL ? src[2 * u] : 0.0, im = u < %lldLL ? src[2 * u + 1] : 0.0;", mi, mi);
    line(C, 3, "if (u == 0 || (%d && u == %lldLL)) im = 0.0;", n % 2 == 0, n / 2);
    line(C, 3, "if (up) im = -im;");
  } else if (cin) {
    line(C, 3, "const double re = t < %lldLL ? src[2 * t] : 0.0, im = t < %lldLL ? src[2 * t + 1] : 0.0;", mi, mi);
  } else {
    line(C, 3, "const double re = t < %lldLL ? src[t] : 0.0, im = 0.0;", mi);
  }
  line(C, 3, "double s_, c_;");
  line(C, 3, "sincos(%d.0 * 6.283185307179586 * (double)((k * t) %% %lldLL) / %lld.0, &s_, &c_);",
       type == 1 || type == 3 ? 1 : -1, n, n);
  line(C, 3, "sr += re * c_ - im * s_;");
  line(C, 3, "si += re * s_ + im * c_;");
  line(C, 2, "}");
  const char *scale = type == 1 || type == 3 ? " / " : "";
  char sc[32] = "";
  if (*scale) snprintf(sc, sizeof sc, " / %lld.0", n);
  if (cout) {
    line(C, 2, "((float *)a0)[e * 2] = (float)(sr%s);", sc);
    line(C, 2, "((float *)a0)[e * 2 + 1] = (float)(si%s);", sc);
  } else {
    line(C, 2, "((float *)a0)[e] = (float)(sr%s);", sc);
  }
  line(C, 1, "}");
  fprintf(C->f, "}\n");
  return PC_OK;
}

/* random: [dtype, out shape, normal, seed, a, b (double bits)]; element i draws philox(i, seed) as in
 * the interpreter: uniform a + (b - a) u kept below b, normal a + b sqrt(-2 ln(1 - u1)) cos(2 pi u2) */
static pc_status render_random(cctx *C, const kir_kernel *k) {
  shp o;
  const int64_t *r = get_shape(k->params + 1, &o);
  pc_dtype dt = (pc_dtype)k->params[0];
  int normal = (int)r[0], fl = pc_dtype_is_float(dt);
  uint64_t seed = (uint64_t)r[1];
  double a, b;
  memcpy(&a, &r[2], 8);
  memcpy(&b, &r[3], 8);
  if (dt == PC_c64) return fail_kernel(C, "%s: random is not defined on c64", "random");
  int64_t n = numel(&o);
  call_signature(C, k, BLOCK, clamp_grid(n, BLOCK));
  line(C, 1, "const double a = %.17g, b = %.17g;", a, b);
  line(C, 1, "PC_GRID_STRIDE(i, %lldLL) {", (long long)n);
  line(C, 2, "unsigned r[4];");
  line(C, 2, "pc_philox((unsigned)i, (unsigned)((unsigned long long)i >> 32), %uu, %uu, r);", (unsigned)seed,
       (unsigned)(seed >> 32));
  line(C, 2, "const double u = pc_unit(r[0], r[1]);");
  if (normal) line(C, 2, "double v = a + b * sqrt(-2.0 * log(1.0 - u)) * cos(6.283185307179586 * pc_unit(r[2], r[3]));");
  else line(C, 2, "double v = a + (b - a) * u;");
  if (!fl && !normal) line(C, 2, "v = floor(v) >= b ? ceil(b) - 1.0 : floor(v);");
  if (!fl && dt != PC_bool) /* saturating, as the interpreter stores doubles into ints */
    line(C, 2, "v = v != v ? 0.0 : v <= (double)%s ? (double)%s : v >= (double)%s ? (double)%s : v;", cu_types[dt].lo,
         cu_types[dt].lo, cu_types[dt].hi, cu_types[dt].hi);
  put_set(C, 2, dt, "a0", "i", fl || dt == PC_bool ? "v" : "(long long)v");
  if (fl && !normal) { /* rounding may have reached b: the next value down */
    const char *E = bits_type(pc_dtype_size(dt));
    fprintf(C->f, "    if (");
    put_get(C, dt, "a0", "i");
    fprintf(C->f, " >= b) {\n");
    line(C, 3, "%s bits = ((%s *)a0)[i];", E, E);
    line(C, 3, "const %s sign = (%s)((%s)1 << %d);", E, E, E, (int)(8 * pc_dtype_size(dt) - 1));
    line(C, 3, "bits = ((bits & sign) || (bits & (%s)~sign) == 0) ? (%s)(((bits & (%s)~sign) + 1) | sign) : (%s)(bits - 1);",
         E, E, E, E);
    line(C, 3, "((%s *)a0)[i] = bits;", E);
    line(C, 2, "}");
  }
  line(C, 1, "}");
  fprintf(C->f, "}\n");
  return PC_OK;
}

typedef pc_status (*call_fn)(cctx *C, const kir_kernel *k);

/* the host side would have to read the count back from the device to report the output's
 * dims (primc_cuda_model_desc has no output_dims): CPU only for now */
static pc_status render_nonzero(cctx *C, const kir_kernel *k) {
  (void)k;
  return fail_kernel(C, "the size of its result depends on the data: %s compiles for the CPU only, not for CUDA",
                     "nonzero");
}

/* the runtime calls of codegen/calls.def (primc_k_<name> on the CPU) by row: a CUDA rendering (or, for
 * nonzero, a refusal saying why); NULL for the host-only ones (dot_packed and maxpool, which host
 * compiles alone make), named in the error */
static const call_fn call_rules[KC_COUNT] = {
    [KC_copy] = render_copy,       [KC_dot] = render_dot,       [KC_conv] = render_conv, [KC_gather] = render_gather,
    [KC_scatter] = render_scatter, [KC_cumsum] = render_cumsum, [KC_sort] = render_sort,  [KC_fft] = render_fft,
    [KC_random] = render_random,   [KC_gather_strided] = render_gather_strided, [KC_nonzero] = render_nonzero,
};
_Static_assert(KC_COUNT == 13, "calls.def changed: give the new call a CUDA rendering in call_rules (or none), "
                               "then raise the count");

static pc_status render_call(cctx *C, const kir_kernel *k) {
  if (call_rules[k->call]) return call_rules[k->call](C, k);
  const char *what = k->n_nodes ? pc_prim(k->nodes[0]->op)->name : kir_call_name(k->call);
  return fail_kernel(C, "%s has no CUDA kernel yet", what);
}

/* ---------------------------------------------------------------- program */

/* text of an origin safe inside a C comment */
static void put_comment_text(FILE *f, const char *s) {
  for (const char *c = s; *c; c++) {
    if (*c == '/' && c > s && c[-1] == '*') fputc('|', f);
    else fputc(*c == '\n' ? ' ' : *c, f);
  }
}

static void kernel_header(cctx *C, const kir_kernel *k) {
  const char *what = k->n_nodes ? pc_prim(k->nodes[k->n_nodes - 1]->op)->name : k->kind == KK_CALL ? kir_call_name(k->call) : "loop";
  snprintf(C->name, sizeof C->name, "k%d_%s", C->idx, what);
  C->launch->name = pc_strdup(C->g, C->name);
  fprintf(C->f, "\n/* %s", C->name);
  if (!k->n_nodes) fprintf(C->f, ": graph output copy");
  for (int i = 0; i < k->n_nodes; i++) {
    const pc_node *n = k->nodes[i];
    fprintf(C->f, "%s %%%d = %s", i ? "\n *" : ":", n->out[0]->id, pc_prim(n->op)->name);
    if (n->origin) {
      fprintf(C->f, " <- ");
      put_comment_text(C->f, n->origin);
    }
  }
  fprintf(C->f, " */\n");
}

pc_status pc_cuda_render_program(const struct kir_program *p, FILE *f, pc_cuda_launch **launches) {
  pc_graph *g = p->g;
  cctx C;
  memset(&C, 0, sizeof C);
  C.p = p;
  C.g = g;
  C.f = f;
  pc_cuda_launch *L = pc_alloc(g, sizeof *L * (size_t)(p->n_kernels + 1));
  if (!L) return pc_fail(g, PC_ERR_NOMEM, "out of memory");
  fprintf(f, "/* CUDA C generated by primc %s: %d kernels, launched in order; workspace %lld bytes, weights %lld bytes */\n",
          PC_VERSION, p->n_kernels, (long long)p->workspace_size, (long long)p->weights_size);
  for (size_t i = 0; i < sizeof prelude / sizeof prelude[0]; i++) fprintf(f, "%s\n", prelude[i]);
  pc_status s = PC_OK;
  for (int i = 0; s == PC_OK && i < p->n_kernels; i++) {
    const kir_kernel *k = &p->kernels[i];
    C.idx = i;
    C.launch = &L[i];
    C.tmp = 0;
    kernel_header(&C, k);
    s = k->kind == KK_CALL ? render_call(&C, k) : render_loop(&C, k);
  }
  if (s == PC_OK && ferror(f)) s = pc_fail(g, PC_ERR_IO, "cannot write the CUDA C");
  if (launches) *launches = L;
  return s;
}

pc_status pc_cuda_render(pc_graph *g, FILE *f) {
  kir_program p;
  pc_status s = kir_build(g, &p);
  if (s != PC_OK) return g->status ? g->status : s;
  return pc_cuda_render_program(&p, f, NULL);
}

static int ends_with(const char *s, const char *suffix) {
  size_t a = strlen(s), b = strlen(suffix);
  return a >= b && !strcmp(s + a - b, suffix);
}

/* CUDA C text, or NVRTC's cubin / PTX of it */
static pc_status emit_binary(pc_graph *g, const pc_codegen_opts *o, const char *src) {
  char err[512];
  pc_nvrtc *nv = pc_nvrtc_open(err, sizeof err);
  if (!nv) return pc_fail(g, PC_ERR_UNSUPPORTED, "%s", err);
  pc_cuda_binary b;
  pc_status s = pc_nvrtc_compile(g, nv, src, o->gpu_arch, &b);
  pc_nvrtc_close(nv);
  if (s != PC_OK) return s;
  if (ends_with(o->output, ".ptx")) s = pc_file_write(g, o->output, b.ptx, b.ptx_size);
  else s = pc_file_write(g, o->output, b.cubin, b.cubin_size);
  pc_cuda_binary_free(&b);
  return s;
}

pc_status pc_codegen_cuda(pc_graph *g, const pc_codegen_opts *opts) {
  if (!opts || !opts->output) return pc_fail(g, PC_ERR_ATTR, "codegen: no output path");
  char *src = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&src, &len);
  if (!f) return pc_fail(g, PC_ERR_NOMEM, "out of memory");
  pc_status s = pc_cuda_render(g, f);
  if (fclose(f) != 0 && s == PC_OK) s = pc_fail(g, PC_ERR_NOMEM, "out of memory");
  if (s == PC_OK) {
    if (ends_with(opts->output, ".cubin") || ends_with(opts->output, ".ptx")) s = emit_binary(g, opts, src);
    else s = pc_file_write(g, opts->output, src, len);
  }
  free(src);
  return s;
}
