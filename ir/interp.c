/* ir/interp.c: the reference interpreter's driver (symbol binding, liveness, dispatch), element access and elementwise prims. */
#include "ir/interp_impl.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------- tensors */

int64_t pc_tensor_numel(const pc_tensor *t) {
  int64_t n = 1;
  for (int i = 0; i < t->rank; i++) n *= t->dims[i];
  return n;
}

size_t pc_tensor_nbytes(const pc_tensor *t) { return (size_t)pc_tensor_numel(t) * pc_dtype_size(t->dtype); }

void pc_tensor_free(pc_tensor *t) {
  if (!t) return;
  free(t->data);
  t->data = NULL;
}

/* ---------------------------------------------------------------- element access */

/* Narrowing double -> float with round-to-odd: a later rounding to f16/bf16
 * then equals one direct rounding of the double (no double-rounding error). */
static float f32_round_odd(double d) {
  float f = (float)d;
  if (!isfinite(f) || (double)f == d) return f;
  uint32_t u;
  memcpy(&u, &f, 4);
  if (fabs((double)f) > fabs(d)) u -= 1; /* step toward zero: truncation */
  u |= 1;
  memcpy(&f, &u, 4);
  return f;
}

/* float -> int: C truncation, but saturating and NaN -> 0 so it is defined everywhere */
#define SAT(T, lo, hi) \
  static T sat_##T(double v) { return isnan(v) ? 0 : v <= (double)(lo) ? (lo) : v >= (double)(hi) ? (hi) : (T)v; }
SAT(int8_t, INT8_MIN, INT8_MAX)
SAT(int16_t, INT16_MIN, INT16_MAX)
SAT(int32_t, INT32_MIN, INT32_MAX)
SAT(int64_t, INT64_MIN, INT64_MAX)
SAT(uint8_t, 0, UINT8_MAX)
SAT(uint16_t, 0, UINT16_MAX)
SAT(uint32_t, 0, UINT32_MAX)
#undef SAT

typedef struct elem_row {
  double (*ld_d)(const void *p, int64_t i);
  int64_t (*ld_i)(const void *p, int64_t i);
  void (*st_d)(void *p, int64_t i, double v);
  void (*st_i)(void *p, int64_t i, int64_t v);
} elem_row;

#define INT_ACCESS(T)                                                                             \
  static double ld_d_##T(const void *p, int64_t i) { return (double)((const T *)p)[i]; }          \
  static int64_t ld_i_##T(const void *p, int64_t i) { return (int64_t)((const T *)p)[i]; }        \
  static void st_d_##T(void *p, int64_t i, double v) { ((T *)p)[i] = sat_##T(v); }                \
  static void st_i_##T(void *p, int64_t i, int64_t v) { ((T *)p)[i] = (T)(uint64_t)v; }
INT_ACCESS(int8_t)
INT_ACCESS(int16_t)
INT_ACCESS(int32_t)
INT_ACCESS(int64_t)
INT_ACCESS(uint8_t)
INT_ACCESS(uint16_t)
INT_ACCESS(uint32_t)
#undef INT_ACCESS

/* u64 is held in int64 as its bit pattern; only its value as a double differs */
static uint64_t sat_uint64_t(double v) {
  return isnan(v) || v <= 0 ? 0 : v >= 18446744073709551616.0 ? UINT64_MAX : (uint64_t)v;
}
static double ld_d_uint64_t(const void *p, int64_t i) { return (double)((const uint64_t *)p)[i]; }
static int64_t ld_i_uint64_t(const void *p, int64_t i) { return (int64_t)((const uint64_t *)p)[i]; }
static void st_d_uint64_t(void *p, int64_t i, double v) { ((uint64_t *)p)[i] = sat_uint64_t(v); }
static void st_i_uint64_t(void *p, int64_t i, int64_t v) { ((uint64_t *)p)[i] = (uint64_t)v; }

static double ld_d_f32(const void *p, int64_t i) { return ((const float *)p)[i]; }
static int64_t ld_i_f32(const void *p, int64_t i) { return sat_int64_t(((const float *)p)[i]); }
static void st_d_f32(void *p, int64_t i, double v) { ((float *)p)[i] = (float)v; }
static void st_i_f32(void *p, int64_t i, int64_t v) { ((float *)p)[i] = (float)v; }

static double ld_d_f64(const void *p, int64_t i) { return ((const double *)p)[i]; }
static int64_t ld_i_f64(const void *p, int64_t i) { return sat_int64_t(((const double *)p)[i]); }
static void st_d_f64(void *p, int64_t i, double v) { ((double *)p)[i] = v; }
static void st_i_f64(void *p, int64_t i, int64_t v) { ((double *)p)[i] = (double)v; }

static double ld_d_f16(const void *p, int64_t i) { return pc_f16_to_f32(((const uint16_t *)p)[i]); }
static int64_t ld_i_f16(const void *p, int64_t i) { return sat_int64_t(ld_d_f16(p, i)); }
static void st_d_f16(void *p, int64_t i, double v) { ((uint16_t *)p)[i] = pc_f32_to_f16(f32_round_odd(v)); }
static void st_i_f16(void *p, int64_t i, int64_t v) { st_d_f16(p, i, (double)v); }

static double ld_d_bf16(const void *p, int64_t i) { return pc_bf16_to_f32(((const uint16_t *)p)[i]); }
static int64_t ld_i_bf16(const void *p, int64_t i) { return sat_int64_t(ld_d_bf16(p, i)); }
static void st_d_bf16(void *p, int64_t i, double v) { ((uint16_t *)p)[i] = pc_f32_to_bf16(f32_round_odd(v)); }
static void st_i_bf16(void *p, int64_t i, int64_t v) { st_d_bf16(p, i, (double)v); }

/* sub-byte ints, one per byte: stores wrap ints to the width and saturate doubles, like the wider types */
#define SUBBYTE_ACCESS(dt, T, lo, hi, wrap)                                                                 \
  static double ld_d_##dt(const void *p, int64_t i) { return ((const T *)p)[i]; }                           \
  static int64_t ld_i_##dt(const void *p, int64_t i) { return ((const T *)p)[i]; }                          \
  static void st_i_##dt(void *p, int64_t i, int64_t v) { ((T *)p)[i] = (T)(wrap); }                         \
  static void st_d_##dt(void *p, int64_t i, double v) {                                                     \
    st_i_##dt(p, i, isnan(v) ? 0 : v <= (lo) ? (lo) : v >= (hi) ? (hi) : (int64_t)v);                     \
  }
SUBBYTE_ACCESS(i4, int8_t, -8, 7, ((v & 0xf) ^ 8) - 8)
SUBBYTE_ACCESS(u4, uint8_t, 0, 15, v & 0xf)
SUBBYTE_ACCESS(i2, int8_t, -2, 1, ((v & 0x3) ^ 2) - 2)
SUBBYTE_ACCESS(u2, uint8_t, 0, 3, v & 0x3)
#undef SUBBYTE_ACCESS

/* 8-bit floats: no saturation (convert_element_type's rule, ir/prims.def) */
#define F8_ACCESS(dt)                                                                                         \
  static double ld_d_##dt(const void *p, int64_t i) { return pc_f8_to_f32(PC_##dt, ((const uint8_t *)p)[i]); } \
  static int64_t ld_i_##dt(const void *p, int64_t i) { return sat_int64_t(ld_d_##dt(p, i)); }               \
  static void st_d_##dt(void *p, int64_t i, double v) {                                                     \
    ((uint8_t *)p)[i] = pc_f32_to_f8(PC_##dt, f32_round_odd(v), 0);                                         \
  }                                                                                                         \
  static void st_i_##dt(void *p, int64_t i, int64_t v) { st_d_##dt(p, i, (double)v); }
F8_ACCESS(f8e4m3fn)
F8_ACCESS(f8e4m3fnuz)
F8_ACCESS(f8e5m2)
F8_ACCESS(f8e5m2fnuz)
F8_ACCESS(f4e2m1)
F8_ACCESS(f8e8m0)
#undef F8_ACCESS

static double ld_d_bool(const void *p, int64_t i) { return ((const uint8_t *)p)[i] != 0; }
static int64_t ld_i_bool(const void *p, int64_t i) { return ((const uint8_t *)p)[i] != 0; }
static void st_d_bool(void *p, int64_t i, double v) { ((uint8_t *)p)[i] = v != 0; }
static void st_i_bool(void *p, int64_t i, int64_t v) { ((uint8_t *)p)[i] = v != 0; }

static double ld_d_c64(const void *p, int64_t i) { return ((const float *)p)[2 * i]; }
static int64_t ld_i_c64(const void *p, int64_t i) { return sat_int64_t(ld_d_c64(p, i)); }
static void st_d_c64(void *p, int64_t i, double v) {
  ((float *)p)[2 * i] = (float)v;
  ((float *)p)[2 * i + 1] = 0;
}
static void st_i_c64(void *p, int64_t i, int64_t v) { st_d_c64(p, i, (double)v); }

#define ROW(dt, T) [PC_##dt] = {ld_d_##T, ld_i_##T, st_d_##T, st_i_##T}
static const elem_row elem_rows[PC_DTYPE_COUNT] = {
    ROW(f16, f16),     ROW(bf16, bf16),     ROW(f32, f32),     ROW(f64, f64),   ROW(i8, int8_t), ROW(i16, int16_t),
    ROW(i32, int32_t), ROW(i64, int64_t), ROW(u8, uint8_t), ROW(bool, bool), ROW(c64, c64),
    ROW(u16, uint16_t), ROW(u32, uint32_t), ROW(u64, uint64_t), ROW(f8e4m3fn, f8e4m3fn),
    ROW(f8e4m3fnuz, f8e4m3fnuz), ROW(f8e5m2, f8e5m2), ROW(f8e5m2fnuz, f8e5m2fnuz), ROW(i4, i4), ROW(u4, u4),
    ROW(i2, i2), ROW(u2, u2), ROW(f4e2m1, f4e2m1), ROW(f8e8m0, f8e8m0),
};
#undef ROW

double pc_ild_d(pc_dtype dt, const void *p, int64_t i) { return elem_rows[dt].ld_d(p, i); }
int64_t pc_ild_i(pc_dtype dt, const void *p, int64_t i) { return elem_rows[dt].ld_i(p, i); }
void pc_ist_d(pc_dtype dt, void *p, int64_t i, double v) { elem_rows[dt].st_d(p, i, v); }
void pc_ist_i(pc_dtype dt, void *p, int64_t i, int64_t v) { elem_rows[dt].st_i(p, i, v); }
int pc_idomain_float(pc_dtype dt) { return pc_dtype_is_float(dt) || dt == PC_c64; }

/* ---------------------------------------------------------------- scalar functions */

double pc_fmax_nan(double a, double b) { return isnan(a) || isnan(b) ? NAN : a > b ? a : b; }
double pc_fmin_nan(double a, double b) { return isnan(a) || isnan(b) ? NAN : a < b ? a : b; }
/* int64 arithmetic wraps (through uint64) so that overflow is defined, like the narrower types */
int64_t pc_iadd_wrap(int64_t a, int64_t b) { return (int64_t)((uint64_t)a + (uint64_t)b); }
int64_t pc_imul_wrap(int64_t a, int64_t b) { return (int64_t)((uint64_t)a * (uint64_t)b); }

/* round half to even without depending on the FPU rounding mode */
static double round_even(double x) {
  double r = floor(x), d = x - r;
  if (d > 0.5 || (d == 0.5 && fmod(r, 2.0) != 0)) r += 1;
  return r;
}

static int64_t ipow(int64_t b, int64_t e) {
  if (e < 0) return b == 1 ? 1 : b == -1 ? ((e & 1) ? -1 : 1) : 0; /* truncation of 1 / b^|e| */
  uint64_t r = 1, x = (uint64_t)b;
  for (; e; e >>= 1, x *= x)
    if (e & 1) r *= x;
  return (int64_t)r;
}

static uint64_t upow(uint64_t b, uint64_t e) {
  uint64_t r = 1;
  for (; e; e >>= 1, b *= b)
    if (e & 1) r *= b;
  return r;
}

/* elementwise scalar functions take up to three operands; unused ones are ignored */
#define F1(name, expr) static double f_##name(double a, double b, double c) { (void)b; (void)c; return (expr); }
#define F2(name, expr) static double f_##name(double a, double b, double c) { (void)c; return (expr); }
#define I1(name, expr) static int64_t i_##name(int64_t a, int64_t b, int64_t c) { (void)b; (void)c; return (expr); }
#define I2(name, expr) static int64_t i_##name(int64_t a, int64_t b, int64_t c) { (void)c; return (expr); }

F1(neg, -a) F1(abs, fabs(a)) F1(exp, exp(a)) F1(log, log(a)) F1(log1p, log1p(a)) F1(expm1, expm1(a))
F1(sqrt, sqrt(a)) F1(rsqrt, 1.0 / sqrt(a)) F1(reciprocal, 1.0 / a) F1(sin, sin(a)) F1(cos, cos(a))
F1(tan, tan(a)) F1(tanh, tanh(a)) F1(erf, erf(a)) F1(sigmoid, 1.0 / (1.0 + exp(-a))) F1(floor, floor(a))
F1(ceil, ceil(a)) F1(round, round_even(a)) F1(sign, isnan(a) ? a : (double)((a > 0) - (a < 0)))
F1(isnan, isnan(a) ? 1 : 0) F1(isinf, isinf(a) ? 1 : 0)
F2(add, a + b) F2(sub, a - b) F2(mul, a * b) F2(div, a / b) F2(pow, pow(a, b)) F2(rem, fmod(a, b))
F2(max, pc_fmax_nan(a, b)) F2(min, pc_fmin_nan(a, b)) F2(atan2, atan2(a, b))
F2(eq, a == b) F2(ne, a != b) F2(lt, a < b) F2(le, a <= b) F2(gt, a > b) F2(ge, a >= b)
static double f_clamp(double a, double b, double c) { return pc_fmin_nan(pc_fmax_nan(a, b), c); }

I1(neg, (int64_t)(0 - (uint64_t)a)) I1(abs, a < 0 ? (int64_t)(0 - (uint64_t)a) : a) I1(sign, (a > 0) - (a < 0))
I1(not, ~a) I1(lnot, !a)
I2(add, pc_iadd_wrap(a, b)) I2(sub, (int64_t)((uint64_t)a - (uint64_t)b)) I2(mul, pc_imul_wrap(a, b))
/* b == 0 is rejected before the call; b == -1 avoids INT64_MIN / -1, which traps */
I2(div, b == -1 ? i_neg(a, 0, 0) : a / b) I2(rem, b == -1 ? 0 : a % b) I2(pow, ipow(a, b))
I2(max, a > b ? a : b) I2(min, a < b ? a : b)
I2(eq, a == b) I2(ne, a != b) I2(lt, a < b) I2(le, a <= b) I2(gt, a > b) I2(ge, a >= b)
I2(and, a & b) I2(or, a | b) I2(xor, a ^ b)
/* shifts by a negative amount or past the width give 0 (left) or the sign fill (right);
 * operands are held sign- or zero-extended in int64, so one 64-bit rule serves every width */
I2(shl, b < 0 || b >= 64 ? 0 : (int64_t)((uint64_t)a << b)) I2(shr, a >> (b < 0 || b >= 64 ? 63 : b))
static int64_t i_clamp(int64_t a, int64_t b, int64_t c) { return i_min(i_max(a, b, 0), c, 0); }

/* u64 operands: the int64 bit patterns read as unsigned where that changes the result
 * (the narrower unsigned types are zero-extended, so the signed rules hold for them) */
#define U1(name, expr) \
  static int64_t u_##name(int64_t sa, int64_t sb, int64_t sc) { \
    uint64_t a = (uint64_t)sa; (void)sb; (void)sc; return (int64_t)(expr); }
#define U2(name, expr) \
  static int64_t u_##name(int64_t sa, int64_t sb, int64_t sc) { \
    uint64_t a = (uint64_t)sa, b = (uint64_t)sb; (void)sc; return (int64_t)(expr); }
U1(abs, a) U1(sign, a != 0)
U2(div, a / b) U2(rem, a % b) U2(max, a > b ? a : b) U2(min, a < b ? a : b)
U2(lt, a < b) U2(le, a <= b) U2(gt, a > b) U2(ge, a >= b) U2(shr, b >= 64 ? 0 : a >> b)
U2(pow, upow(a, b))
static int64_t u_clamp(int64_t a, int64_t b, int64_t c) { return u_min(u_max(a, b, 0), c, 0); }
#undef U1
#undef U2

#undef F1
#undef F2
#undef I1
#undef I2

typedef struct ew_row {
  double (*f)(double, double, double);    /* float operands (computed in double, rounded once) */
  int64_t (*i)(int64_t, int64_t, int64_t); /* int operands, and bool as 0/1 unless b is set */
  int64_t (*b)(int64_t, int64_t, int64_t); /* bool operands when they differ from the int rule */
  int64_t (*u)(int64_t, int64_t, int64_t); /* u64 operands when they differ from the int rule */
  int nonzero_divisor;                      /* int operand 1 must not be 0 */
} ew_row;

PC_PRIMS_CHECKED(74); /* a row per UNARY/BINARY/TERNARY prim (run_elementwise) */
static const ew_row ew_rows[PC_OP_COUNT] = {
    [PC_OP_neg] = {f_neg, i_neg, NULL, NULL, 0},
    [PC_OP_abs] = {f_abs, i_abs, NULL, u_abs, 0},
    [PC_OP_exp] = {f_exp, NULL, NULL, NULL, 0},
    [PC_OP_log] = {f_log, NULL, NULL, NULL, 0},
    [PC_OP_log1p] = {f_log1p, NULL, NULL, NULL, 0},
    [PC_OP_expm1] = {f_expm1, NULL, NULL, NULL, 0},
    [PC_OP_sqrt] = {f_sqrt, NULL, NULL, NULL, 0},
    [PC_OP_rsqrt] = {f_rsqrt, NULL, NULL, NULL, 0},
    [PC_OP_reciprocal] = {f_reciprocal, NULL, NULL, NULL, 0},
    [PC_OP_sin] = {f_sin, NULL, NULL, NULL, 0},
    [PC_OP_cos] = {f_cos, NULL, NULL, NULL, 0},
    [PC_OP_tan] = {f_tan, NULL, NULL, NULL, 0},
    [PC_OP_tanh] = {f_tanh, NULL, NULL, NULL, 0},
    [PC_OP_erf] = {f_erf, NULL, NULL, NULL, 0},
    [PC_OP_sigmoid] = {f_sigmoid, NULL, NULL, NULL, 0},
    [PC_OP_floor] = {f_floor, NULL, NULL, NULL, 0},
    [PC_OP_ceil] = {f_ceil, NULL, NULL, NULL, 0},
    [PC_OP_round] = {f_round, NULL, NULL, NULL, 0},
    [PC_OP_sign] = {f_sign, i_sign, NULL, u_sign, 0},
    [PC_OP_not] = {NULL, i_not, i_lnot, NULL, 0},
    [PC_OP_isnan] = {f_isnan, NULL, NULL, NULL, 0},
    [PC_OP_isinf] = {f_isinf, NULL, NULL, NULL, 0},
    [PC_OP_add] = {f_add, i_add, NULL, NULL, 0},
    [PC_OP_sub] = {f_sub, i_sub, NULL, NULL, 0},
    [PC_OP_mul] = {f_mul, i_mul, NULL, NULL, 0},
    [PC_OP_div] = {f_div, i_div, NULL, u_div, 1},
    [PC_OP_pow] = {f_pow, i_pow, NULL, u_pow, 0},
    [PC_OP_rem] = {f_rem, i_rem, NULL, u_rem, 1},
    [PC_OP_max] = {f_max, i_max, NULL, u_max, 0},
    [PC_OP_min] = {f_min, i_min, NULL, u_min, 0},
    [PC_OP_atan2] = {f_atan2, NULL, NULL, NULL, 0},
    [PC_OP_eq] = {f_eq, i_eq, NULL, NULL, 0},
    [PC_OP_ne] = {f_ne, i_ne, NULL, NULL, 0},
    [PC_OP_lt] = {f_lt, i_lt, NULL, u_lt, 0},
    [PC_OP_le] = {f_le, i_le, NULL, u_le, 0},
    [PC_OP_gt] = {f_gt, i_gt, NULL, u_gt, 0},
    [PC_OP_ge] = {f_ge, i_ge, NULL, u_ge, 0},
    [PC_OP_and] = {NULL, i_and, NULL, NULL, 0},
    [PC_OP_or] = {NULL, i_or, NULL, NULL, 0},
    [PC_OP_xor] = {NULL, i_xor, NULL, NULL, 0},
    [PC_OP_bitwise_and] = {NULL, i_and, NULL, NULL, 0},
    [PC_OP_bitwise_or] = {NULL, i_or, NULL, NULL, 0},
    [PC_OP_bitwise_xor] = {NULL, i_xor, NULL, NULL, 0},
    [PC_OP_shift_left] = {NULL, i_shl, NULL, NULL, 0},
    [PC_OP_shift_right] = {NULL, i_shr, NULL, u_shr, 0},
    [PC_OP_clamp] = {f_clamp, i_clamp, NULL, u_clamp, 0},
};

/* every UNARY/BINARY/TERNARY prim: operands of one shape and dtype, one row of ew_rows */
static pc_status run_elementwise(pc_ictx *c, const pc_node *n, const pc_tensor *in, pc_tensor *out) {
  const ew_row *r = &ew_rows[n->op];
  pc_dtype dt = in[0].dtype, odt = out[0].dtype;
  int64_t numel = pc_tensor_numel(&out[0]);
  for (int k = 0; k < n->n_in; k++) {
    if (in[k].dtype != dt) return pc_node_fail(c->g, n, PC_ERR_TYPE, "operand %d is %s, operand 0 is %s", k,
                                                pc_dtype_name(in[k].dtype), pc_dtype_name(dt));
    if (pc_tensor_numel(&in[k]) != numel)
      return pc_node_fail(c->g, n, PC_ERR_SHAPE, "operand %d has %lld elements, the result %lld", k,
                          (long long)pc_tensor_numel(&in[k]), (long long)numel);
  }
  int fl = pc_dtype_is_float(dt);
  double (*f)(double, double, double) = fl ? r->f : NULL;
  int64_t (*fi)(int64_t, int64_t, int64_t) = fl ? NULL : dt == PC_bool && r->b ? r->b : dt == PC_u64 && r->u ? r->u : r->i;
  if (dt == PC_c64 || (!f && !fi))
    return pc_node_fail(c->g, n, PC_ERR_TYPE, "not defined on %s", pc_dtype_name(dt));
  const void *a = in[0].data, *b = n->n_in > 1 ? in[1].data : NULL, *cc = n->n_in > 2 ? in[2].data : NULL;
  for (int64_t i = 0; i < numel; i++) {
    if (f) {
      double x = pc_ild_d(dt, a, i), y = b ? pc_ild_d(dt, b, i) : 0, z = cc ? pc_ild_d(dt, cc, i) : 0;
      pc_ist_d(odt, out[0].data, i, f(x, y, z));
      continue;
    }
    int64_t x = pc_ild_i(dt, a, i), y = b ? pc_ild_i(dt, b, i) : 0, z = cc ? pc_ild_i(dt, cc, i) : 0;
    if (r->nonzero_divisor && y == 0)
      return pc_node_fail(c->g, n, PC_ERR_RANGE, "integer division by zero at element %lld", (long long)i);
    pc_ist_i(odt, out[0].data, i, fi(x, y, z));
  }
  return PC_OK;
}

/* ---------------------------------------------------------------- dispatch table */

#define PC_IOP_UNARY(name) run_elementwise
#define PC_IOP_BINARY(name) run_elementwise
#define PC_IOP_TERNARY(name) run_elementwise
#define PC_IOP_OTHER(name) pc_iop_##name
static const pc_iop_fn iop_table[PC_OP_COUNT] = {
#define PRIM(name, n_in, n_out, kind, operands, result, fuse, inl) [PC_OP_##name] = PC_IOP_##kind(name),
#include "ir/prims.def"
#undef PRIM
};

/* ---------------------------------------------------------------- symbols and shapes */

/* bytes of a tensor of this shape, or -1 when it could not be addressed */
static int64_t checked_nbytes(const pc_tensor *t) {
  int64_t n = (int64_t)pc_dtype_size(t->dtype);
  for (int i = 0; i < t->rank; i++) {
    if (t->dims[i] == 0) return 0;
    if (t->dims[i] < 0 || t->dims[i] > ((int64_t)1 << 46) / n) return -1;
    n *= t->dims[i];
  }
  return n;
}

/* a binding failure, naming the node when there is one */
static pc_status bind_fail(pc_ictx *c, const pc_node *n, pc_status code, const char *what, const char *fmt, ...) {
  char msg[300];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  return n ? pc_node_fail(c->g, n, code, "%s: %s", what, msg) : pc_fail(c->g, code, "%s: %s", what, msg);
}

/* binds the symbols of type t from the concrete tensor x, checking every concrete dim */
static pc_status bind_type(pc_ictx *c, const pc_node *n, const pc_type *t, const pc_tensor *x, const char *what) {
  if (x->dtype != t->dtype)
    return bind_fail(c, n, PC_ERR_TYPE, what, "dtype %s, the graph expects %s", pc_dtype_name(x->dtype),
                     pc_dtype_name(t->dtype));
  if (x->rank != t->rank) return bind_fail(c, n, PC_ERR_SHAPE, what, "rank %d, the graph expects %d", x->rank, t->rank);
  for (int i = 0; i < t->rank; i++) {
    int64_t d = t->dims[i], v = x->dims[i];
    if (v < 0) return bind_fail(c, n, PC_ERR_SHAPE, what, "dim %d is negative (%lld)", i, (long long)v);
    if (!PC_DIM_IS_SYM(d)) {
      if (d != v)
        return bind_fail(c, n, PC_ERR_SHAPE, what, "dim %d is %lld, the graph expects %lld", i, (long long)v,
                         (long long)d);
      continue;
    }
    int s = PC_DIM_SYM_ID(d);
    if (s >= c->n_sym) return bind_fail(c, n, PC_ERR_INTERNAL, what, "dim %d names unknown symbol %d", i, s);
    const pc_sym *sym = &c->g->syms[s];
    if (c->sym[s] >= 0 && c->sym[s] != v)
      return bind_fail(c, n, PC_ERR_SHAPE, what, "dim %d is %lld, but %s is already %lld", i, (long long)v,
                       sym->name, (long long)c->sym[s]);
    if (v < sym->lo || v > sym->hi)
      return bind_fail(c, n, PC_ERR_SHAPE, what, "dim %d is %lld, outside %s's bound [%lld, %lld]", i, (long long)v,
                       sym->name, (long long)sym->lo, (long long)sym->hi);
    c->sym[s] = v;
  }
  if (!x->data && checked_nbytes(x) != 0) return bind_fail(c, n, PC_ERR_INTERNAL, what, "no data");
  return PC_OK;
}

/* the concrete shape of t under the bindings; 0 when a symbol is still unbound */
static int resolve_type(const pc_ictx *c, const pc_type *t, pc_tensor *out) {
  int ok = 1;
  out->dtype = t->dtype;
  out->rank = t->rank;
  for (int i = 0; i < t->rank; i++) {
    int64_t d = t->dims[i];
    if (PC_DIM_IS_SYM(d)) {
      int s = PC_DIM_SYM_ID(d);
      d = s < c->n_sym ? c->sym[s] : -1;
      if (d < 0) ok = 0;
    }
    out->dims[i] = d;
  }
  return ok;
}

static void free_outputs(pc_tensor *out, int n) {
  for (int i = 0; i < n; i++) pc_tensor_free(&out[i]);
}

/* allocates the node's outputs, runs its prim, binds symbols its outputs define (nonzero's count) */
static pc_status run_node(pc_ictx *c, const pc_node *n, const pc_tensor *in, pc_tensor *out) {
  for (int i = 0; i < n->n_out; i++) out[i].data = NULL; /* callers may free them on failure */
  for (int i = 0; i < n->n_out; i++) {
    if (!resolve_type(c, &n->out[i]->type, &out[i])) continue;
    int64_t nb = checked_nbytes(&out[i]), lim = c->g->mem_limit;
    if (nb < 0) return free_outputs(out, i), pc_node_fail(c->g, n, PC_ERR_RANGE, "result %d is too large", i);
    if (lim > 0 && nb > lim - c->live)
      return free_outputs(out, i),
             pc_node_fail(c->g, n, PC_ERR_NOMEM,
                          "result %d needs %lld bytes with %lld held, over the memory limit of %lld bytes "
                          "(--mem-limit)", i, (long long)nb, (long long)c->live, (long long)lim);
    out[i].data = calloc(1, nb ? (size_t)nb : 1);
    if (!out[i].data) return free_outputs(out, i), pc_node_fail(c->g, n, PC_ERR_NOMEM, "out of memory");
  }
  for (int i = 0; i < n->n_out; i++) c->live += out[i].data ? (int64_t)pc_tensor_nbytes(&out[i]) : 0;
  pc_status st = iop_table[n->op](c, n, in, out);
  for (int i = 0; st == PC_OK && i < n->n_out; i++) {
    if (!out[i].data) st = pc_node_fail(c->g, n, PC_ERR_INTERNAL, "result %d was not produced", i);
    else st = bind_type(c, n, &n->out[i]->type, &out[i], "result");
  }
  if (st != PC_OK) free_outputs(out, n->n_out);
  return st;
}

static int ictx_init(pc_ictx *c, pc_graph *g) {
  c->g = g;
  c->live = 0;
  c->n_sym = g->n_syms;
  c->sym = malloc(sizeof *c->sym * (size_t)(g->n_syms ? g->n_syms : 1));
  if (!c->sym) return 0;
  for (int i = 0; i < g->n_syms; i++) c->sym[i] = -1;
  return 1;
}

pc_status pc_interp_node(pc_graph *g, const pc_node *n, const pc_tensor *in, pc_tensor *out) {
  if (g->status != PC_OK) return g->status;
  pc_ictx c;
  if (!ictx_init(&c, g)) return pc_fail(g, PC_ERR_NOMEM, "out of memory");
  pc_status st = PC_OK;
  for (int i = 0; st == PC_OK && i < n->n_in; i++) {
    char what[32];
    snprintf(what, sizeof what, "operand %d", i);
    st = bind_type(&c, n, &n->in[i]->type, &in[i], what);
  }
  if (st == PC_OK) st = run_node(&c, n, in, out);
  free(c.sym);
  return st;
}

/* ---------------------------------------------------------------- whole graph */

typedef struct slot {
  pc_tensor t;
  int owned, ready;
} slot;

/* index of the last node reading each value; n_nodes for graph outputs (never freed) */
static int *last_uses(const pc_graph *g) {
  int *last = malloc(sizeof *last * (size_t)(g->n_values ? g->n_values : 1));
  if (!last) return NULL;
  for (int i = 0; i < g->n_values; i++) last[i] = -1;
  for (int k = 0; k < g->n_nodes; k++) {
    const pc_node *n = g->nodes[k];
    if (n->dead) continue;
    for (int j = 0; j < n->n_in; j++) last[n->in[j]->id] = k;
  }
  for (int i = 0; i < g->n_outputs; i++) last[g->outputs[i]->id] = g->n_nodes;
  return last;
}

#define MAX_RESULTS 4

static void slot_release(pc_ictx *c, slot *s) {
  if (s->t.data) c->live -= (int64_t)pc_tensor_nbytes(&s->t);
  pc_tensor_free(&s->t);
}

static pc_status run_graph(pc_ictx *c, slot *vals, const int *last, pc_tensor *in) {
  pc_graph *g = c->g;
  pc_tensor out[MAX_RESULTS];
  for (int k = 0; k < g->n_nodes; k++) {
    const pc_node *n = g->nodes[k];
    if (n->dead) continue;
    if (n->n_out > MAX_RESULTS) return pc_node_fail(g, n, PC_ERR_INTERNAL, "%d results", n->n_out);
    for (int j = 0; j < n->n_in; j++) {
      const slot *s = &vals[n->in[j]->id];
      if (!s->ready) return pc_node_fail(g, n, PC_ERR_INTERNAL, "operand %d is not computed yet", j);
      in[j] = s->t;
    }
    pc_status st = run_node(c, n, in, out);
    if (st != PC_OK) return st;
    for (int i = 0; i < n->n_out; i++) {
      slot *s = &vals[n->out[i]->id];
      s->t = out[i];
      s->owned = s->ready = 1;
      if (last[n->out[i]->id] < 0) slot_release(c, s); /* never read */
    }
    for (int j = 0; j < n->n_in; j++) {
      slot *s = &vals[n->in[j]->id];
      if (last[n->in[j]->id] == k && s->owned) slot_release(c, s);
    }
  }
  return PC_OK;
}

static pc_status copy_outputs(pc_graph *g, const slot *vals, pc_tensor *outputs) {
  for (int i = 0; i < g->n_outputs; i++) {
    const slot *s = &vals[g->outputs[i]->id];
    if (!s->ready) return pc_fail(g, PC_ERR_INTERNAL, "graph output %d is never computed", i);
    size_t nb = pc_tensor_nbytes(&s->t);
    outputs[i] = s->t;
    outputs[i].data = malloc(nb ? nb : 1);
    if (!outputs[i].data) {
      free_outputs(outputs, i);
      return pc_fail(g, PC_ERR_NOMEM, "out of memory");
    }
    if (nb) memcpy(outputs[i].data, s->t.data, nb);
  }
  return PC_OK;
}

pc_status pc_interp(pc_graph *g, const pc_tensor *inputs, int n_inputs, pc_tensor *outputs, int n_outputs) {
  if (g->status != PC_OK) return g->status;
  if (n_inputs != g->n_inputs) return pc_fail(g, PC_ERR_SHAPE, "graph takes %d inputs, got %d", g->n_inputs, n_inputs);
  if (n_outputs != g->n_outputs)
    return pc_fail(g, PC_ERR_SHAPE, "graph has %d outputs, room for %d given", g->n_outputs, n_outputs);
  for (int i = 0; i < n_outputs; i++) outputs[i].data = NULL;
  pc_ictx c;
  slot *vals = calloc((size_t)(g->n_values ? g->n_values : 1), sizeof *vals);
  int *last = last_uses(g);
  if (!vals || !last || !ictx_init(&c, g)) {
    free(vals);
    free(last);
    return pc_fail(g, PC_ERR_NOMEM, "out of memory");
  }
  pc_status st = PC_OK;
  for (int i = 0; st == PC_OK && i < n_inputs; i++) {
    const pc_value *v = g->inputs[i];
    char what[96];
    snprintf(what, sizeof what, "input %d (%s)", i, v->name ? v->name : "unnamed");
    st = bind_type(&c, NULL, &v->type, &inputs[i], what);
    vals[v->id].t = inputs[i];
    vals[v->id].ready = 1;
  }
  int max_in = 1;
  for (int k = 0; k < g->n_nodes; k++) max_in = g->nodes[k]->n_in > max_in ? g->nodes[k]->n_in : max_in;
  pc_tensor *in = malloc(sizeof *in * (size_t)max_in);
  if (!in && st == PC_OK) st = pc_fail(g, PC_ERR_NOMEM, "out of memory");
  if (st == PC_OK) st = run_graph(&c, vals, last, in);
  free(in);
  if (st == PC_OK) st = copy_outputs(g, vals, outputs);
  for (int i = 0; i < g->n_values; i++)
    if (vals[i].owned) pc_tensor_free(&vals[i].t);
  free(vals);
  free(last);
  free(c.sym);
  return st;
}
