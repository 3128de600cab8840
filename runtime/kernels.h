/* runtime/kernels.h: what the generic kernels share: element access by dtype (f16, bf16, f8, ints as double or int64) and the params' shape layout. */
#ifndef PRIMC_KERNELS_INTERNAL_H
#define PRIMC_KERNELS_INTERNAL_H

#include "runtime/primc_rt.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

/* ---------------------------------------------------------------- element access by dtype */

/* every element seen as a double (floats) or an int64 (ints, bool); kernels that
 * are not on the fast paths go through these */
static inline uint16_t f32_to_f16(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  uint32_t sign = (u >> 16) & 0x8000, a = u & 0x7fffffff;
  if (a > 0x7f800000) return (uint16_t)(sign | 0x7e00);
  if (a >= 0x477ff000) return (uint16_t)(sign | 0x7c00); /* overflow after rounding */
  if (a < 0x38800000) {                                  /* subnormal f16 */
    float x;
    memcpy(&x, &a, 4);
    return (uint16_t)(sign | (uint16_t)lrintf(x * 16777216.0f));
  }
  uint32_t r = a + 0xfff + ((a >> 13) & 1);
  return (uint16_t)(sign | ((r >> 13) - (112u << 10)));
}

/* bf16: f32's top half, rounded to nearest even (NaN stays NaN, quieted) */
static inline uint16_t primc_f32_to_bf16(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40);
  return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1)) >> 16);
}

static inline float primc_bf16_to_f32(uint16_t h) {
  uint32_t u = (uint32_t)h << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
}

static inline float f16_to_f32(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000) << 16, e = (h >> 10) & 0x1f, m = h & 0x3ff, u;
  if (e == 0) {
    float x = (float)m / 16777216.0f;
    return sign ? -x : x;
  }
  u = e == 31 ? sign | 0x7f800000 | (m << 13) : sign | ((e + 112) << 23) | (m << 13);
  float f;
  memcpy(&f, &u, 4);
  return f;
}

/* 8-bit floats (ONNX FLOAT8*, dtypes PRIMC_F8E4M3FN..PRIMC_F8E5M2FNUZ in order): mantissa bits, bias, and
 * the NaN/inf scheme: e5m2 has IEEE inf and NaNs, e4m3fn no inf and NaN S.1111.111, fnuz NaN 0x80 and no -0 */
typedef struct f8_fmt {
  int mbits, bias, fn, fnuz, finite; /* finite: f4e2m1, no inf or NaN, saturating, sign bit 0x8 */
  uint32_t maxcode; /* largest finite magnitude */
} f8_fmt;

static inline const f8_fmt *f8_of(int dt) {
  static const f8_fmt f[4] = {{3, 7, 1, 0, 0, 0x7e}, {3, 8, 0, 1, 0, 0x7f}, {2, 15, 0, 0, 0, 0x7b}, {2, 16, 0, 1, 0, 0x7f}};
  static const f8_fmt f4 = {1, 1, 0, 0, 1, 0x7};
  if (dt == PRIMC_F4E2M1) return &f4;
  return dt >= PRIMC_F8E4M3FN && dt <= PRIMC_F8E5M2FNUZ ? &f[dt - PRIMC_F8E4M3FN] : NULL;
}

static inline float f8_to_f32(const f8_fmt *f, uint8_t b) {
  int sb = f->finite ? 0x8 : 0x80, mag = b & (sb - 1), e = mag >> f->mbits, m = mag & ((1 << f->mbits) - 1);
  float s = (b & sb) ? -1.0f : 1.0f;
  if (f->finite) {
  } else if (f->fnuz ? b == 0x80 : f->fn ? mag == 0x7f : e == (0x7f >> f->mbits)) {
    return f->fn || f->fnuz || m ? NAN : s * INFINITY;
  }
  return s * ldexpf((float)(e ? m + (1 << f->mbits) : m), (e ? e : 1) - f->bias - f->mbits);
}

/* round to nearest even, no saturation: overflow gives inf (e5m2) or NaN */
static inline uint8_t f32_to_f8(const f8_fmt *f, float x) {
  uint32_t u;
  memcpy(&u, &x, 4);
  uint32_t sb = f->finite ? 0x8 : 0x80, sign = u >> 31 ? sb : 0, a = u & 0x7fffffff, q;
  uint32_t nan = f->fnuz ? 0x80 : f->finite ? sign ^ sb : sign | (f->fn ? 0x7f : 0x7e);
  if (a > 0x7f800000) return (uint8_t)nan;
  int emin = 1 - f->bias, shift = 23 - f->mbits;
  if (a < (uint32_t)(emin + 127) << 23) { /* subnormal steps of 2^(emin - mbits); the scaling is exact */
    q = (uint32_t)lrintf(ldexpf(fabsf(x), f->mbits - emin));
  } else {
    q = ((a + (1u << (shift - 1)) - 1 + ((a >> shift) & 1)) >> shift) - ((uint32_t)(127 - f->bias) << f->mbits);
  }
  if (q > f->maxcode) return (uint8_t)(f->finite ? sign | f->maxcode : f->fn || f->fnuz ? nan : sign | 0x7c);
  return (uint8_t)(q == 0 && f->fnuz ? 0 : sign | q);
}

/* f8e8m0: 2^(b-127), 0xff NaN; stores keep the f32 exponent field (the compiler's ir/types.c rule) */
static inline float e8m0_to_f32(uint8_t b) {
  uint32_t u = b ? (uint32_t)b << 23 : 0x400000u;
  float f;
  memcpy(&f, &u, 4);
  return b == 0xff ? NAN : f;
}

static inline uint8_t f32_to_e8m0(float x) {
  uint32_t u;
  memcpy(&u, &x, 4);
  return (uint8_t)(u >> 23);
}

static inline double get_f(const void *p, int64_t i, int dt) {
  switch (dt) { /* storage formats */
  case PRIMC_F16: return f16_to_f32(((const uint16_t *)p)[i]);
  case PRIMC_BF16: return primc_bf16_to_f32(((const uint16_t *)p)[i]);
  case PRIMC_F32: return ((const float *)p)[i];
  case PRIMC_F64: return ((const double *)p)[i];
  case PRIMC_F8E8M0: return e8m0_to_f32(((const uint8_t *)p)[i]);
  default: return f8_of(dt) ? f8_to_f32(f8_of(dt), ((const uint8_t *)p)[i]) : 0;
  }
}

static inline void set_f(void *p, int64_t i, int dt, double v) {
  float f = (float)v;
  switch (dt) {
  case PRIMC_F16: ((uint16_t *)p)[i] = f32_to_f16(f); break;
  case PRIMC_BF16: ((uint16_t *)p)[i] = primc_f32_to_bf16(f); break;
  case PRIMC_F32: ((float *)p)[i] = f; break;
  case PRIMC_F64: ((double *)p)[i] = v; break;
  case PRIMC_F8E8M0: ((uint8_t *)p)[i] = f32_to_e8m0(f); break;
  default:
    if (f8_of(dt)) ((uint8_t *)p)[i] = f32_to_f8(f8_of(dt), f);
    break;
  }
}

static inline int64_t get_i(const void *p, int64_t i, int dt) {
  switch (dt) {
  case PRIMC_I8: return ((const int8_t *)p)[i];
  case PRIMC_I16: return ((const int16_t *)p)[i];
  case PRIMC_I32: return ((const int32_t *)p)[i];
  case PRIMC_I64: return ((const int64_t *)p)[i];
  case PRIMC_U8: case PRIMC_BOOL: return ((const uint8_t *)p)[i];
  case PRIMC_U16: return ((const uint16_t *)p)[i];
  case PRIMC_U32: return ((const uint32_t *)p)[i];
  case PRIMC_U64: return (int64_t)((const uint64_t *)p)[i]; /* the bits; see ordered() */
  case PRIMC_I4: case PRIMC_I2: return ((const int8_t *)p)[i];
  case PRIMC_U4: case PRIMC_U2: return ((const uint8_t *)p)[i];
  default: return 0;
  }
}

static inline void set_i(void *p, int64_t i, int dt, int64_t v) {
  switch (dt) {
  case PRIMC_I8: ((int8_t *)p)[i] = (int8_t)v; break;
  case PRIMC_I16: ((int16_t *)p)[i] = (int16_t)v; break;
  case PRIMC_I32: ((int32_t *)p)[i] = (int32_t)v; break;
  case PRIMC_I64: ((int64_t *)p)[i] = v; break;
  case PRIMC_U8: ((uint8_t *)p)[i] = (uint8_t)v; break;
  case PRIMC_U16: ((uint16_t *)p)[i] = (uint16_t)v; break;
  case PRIMC_U32: ((uint32_t *)p)[i] = (uint32_t)v; break;
  case PRIMC_U64: ((uint64_t *)p)[i] = (uint64_t)v; break;
  case PRIMC_I4: ((int8_t *)p)[i] = (int8_t)(((v & 0xf) ^ 8) - 8); break; /* wrap to the width */
  case PRIMC_U4: ((uint8_t *)p)[i] = (uint8_t)(v & 0xf); break;
  case PRIMC_I2: ((int8_t *)p)[i] = (int8_t)(((v & 0x3) ^ 2) - 2); break;
  case PRIMC_U2: ((uint8_t *)p)[i] = (uint8_t)(v & 0x3); break;
  case PRIMC_BOOL: ((uint8_t *)p)[i] = v != 0; break;
  default: break;
  }
}

static inline int is_float(int dt) {
  return dt == PRIMC_F16 || dt == PRIMC_BF16 || dt == PRIMC_F32 || dt == PRIMC_F64 || dt == PRIMC_F8E8M0 || f8_of(dt) != NULL;
}

static inline size_t dsize(int dt) {
  static const size_t s[PRIMC_DTYPE_COUNT] = {2, 2, 4, 8, 1, 2, 4, 8, 1, 1, 8, 2, 4, 8, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1};
  return dt >= 0 && dt < PRIMC_DTYPE_COUNT ? s[dt] : 1;
}

/* get_i's value mapped so that signed order is the dtype's order: u64 bits have their top bit flipped */
static inline int64_t ordered(int64_t v, int dt) { return dt == PRIMC_U64 ? (int64_t)((uint64_t)v ^ (1ull << 63)) : v; }

/* a shape as codegen lays it out in params: rank then 8 dims */
typedef struct shp {
  int rank;
  int64_t d[PRIMC_MAX_RANK];
} shp;

static inline const int64_t *get_shape(const int64_t *q, shp *s) {
  s->rank = (int)q[0];
  for (int i = 0; i < PRIMC_MAX_RANK; i++) s->d[i] = q[1 + i];
  return q + 1 + PRIMC_MAX_RANK;
}

static inline int64_t numel(const shp *s) {
  int64_t n = 1;
  for (int i = 0; i < s->rank; i++) n *= s->d[i];
  return n;
}

/* outer (dims before axis), len (axis), inner (dims after) */
static inline void split_axis(const shp *s, int axis, int64_t *outer, int64_t *len, int64_t *inner) {
  *outer = *inner = 1;
  for (int i = 0; i < axis; i++) *outer *= s->d[i];
  for (int i = axis + 1; i < s->rank; i++) *inner *= s->d[i];
  *len = s->rank ? s->d[axis] : 1;
}

/* ---------------------------------------------------------------- conv_i8's requantized output */

/* the words at PRIMC_CONV_I8_RQ_AT and the buffers they name (runtime/kernels_conv_i8_rq.c) */
typedef struct primc_i8_rq {
  int kind;                           /* PRIMC_CONV_I8_RQ_*: stage 1's arithmetic */
  int32_t ibias;                      /* when ib is NULL */
  const int32_t *ib;                  /* per-channel int32 bias, or NULL */
  const void *vmul, *vadd;            /* per-channel f32 / f64 operands, or NULL: the scalars */
  double mul, add, div, zp, lo, hi;   /* stage 1 */
  const float *res;                   /* stage 2's residual (NCHW, as the output), NULL: no stage 2 */
  float z1, s1, div2, zp2, lo2, hi2;  /* stage 2 */
  /* 1 / div, and whether both are normal numbers: the AVX-512 blocks of f64 words multiply, dividing only the lanes
   * near a half (the results are the division's all the same) */
  double rdiv;
  int rdiv_ok;
  int n_out;
  struct {
    int kind;          /* PRIMC_CONV_I8_OUT_* */
    float zsub, smul;  /* an f32 output's (q - zsub) * smul */
    void *y;           /* NCHW */
  } out[2];
} primc_i8_rq;
/* r from the words w and the call's bufs (o output channels); PRIMC_ERR_RUNTIME on words no codegen writes */
int primc_i8_rq_read(const int64_t *w, void *const *bufs, int64_t o, primc_i8_rq *r);
/* the GEMM's [p][og] sums of the group whose first channel is o0 into the outputs' elements from yat on ([og][p]) */
void primc_i8_rq_out(const primc_i8_rq *r, const int32_t *acc, int64_t p, int64_t og, int64_t o0, int64_t yat);

/* next multi-index over dims[0..n); 0 when wrapped */
static inline int next_index(int64_t *idx, const int64_t *dims, int n) {
  for (int d = n - 1; d >= 0; d--) {
    if (++idx[d] < dims[d]) return 1;
    idx[d] = 0;
  }
  return 0;
}

/* a stride-1 3x3 conv's weight gradient out [M][C][3][3] as Winograd F(2x2, 3x3) (runtime/conv/winograd.c): x the
 * padded input's window grid (element (c, image, row, col) for rows [0, oh + 2) and columns [0, ow + 2) at x_off +
 * c xs_c + image xs_n + row xs_h + col xs_w where row is within [x_rlo, x_rhi) and col within [x_clo, x_chi), zero
 * elsewhere: the unpadded input read where it lies), a the output gradient ((m, image, row, col) likewise for [0,
 * oh) x [0, ow)), scratch of primc_wgrad_wino_floats floats */
typedef struct primc_wgrad {
  int64_t M, C, images, oh, ow;
  const float *x;
  int64_t x_off, xs_c, xs_n, xs_h, xs_w, x_rlo, x_rhi, x_clo, x_chi;
  const float *a;
  int64_t a_off, a_sm, a_sn, a_sh, a_sw;
  float *out, *scratch;
} primc_wgrad;
int primc_wgrad_wino_run(const primc_wgrad *w);

#endif
