/* runtime/kernels_conv_i8_rq.c: a conv_i8 call's requantized result: the GEMM's [pixels][channels] int32 sums
 * turned into the NCHW outputs in one pass (the words at PRIMC_CONV_I8_RQ_AT: stage 1, an optional residual stage 2,
 * one or two outputs), instead of an int32 NCHW result that a loop kernel reads again. The arithmetic is the loop
 * kernel's, operation for operation in the same types, so the bytes are the same. */
#include "runtime/kernels.h"

static int portable; /* tests: the element-by-element path on every CPU */
void primc_conv_i8_rq_force_portable(int on) { __atomic_store_n(&portable, on != 0, __ATOMIC_RELAXED); }

/* 1 when every value in [lo, hi] converts to the output kind exactly */
static int fits_out(int kind, double lo, double hi) {
  double tlo = kind == PRIMC_CONV_I8_OUT_U8 ? 0 : kind == PRIMC_CONV_I8_OUT_S8 ? -128 : -16777216;
  double thi = kind == PRIMC_CONV_I8_OUT_U8 ? 255 : kind == PRIMC_CONV_I8_OUT_S8 ? 127 : 16777216;
  return lo >= tlo && hi <= thi && lo <= hi;
}

static int is_f32(double v) { return (double)(float)v == v; }

int primc_i8_rq_read(const int64_t *w, void *const *bufs, int64_t o, primc_i8_rq *r) {
  memset(r, 0, sizeof *r);
  r->kind = (int)w[0];
  if (r->kind == PRIMC_CONV_I8_RQ_NONE) return PRIMC_OK;
  int64_t mask = w[2];
  r->n_out = (int)w[1];
  if ((r->kind != PRIMC_CONV_I8_RQ_F32 && r->kind != PRIMC_CONV_I8_RQ_F64) || r->n_out < 1 || r->n_out > 2 ||
      mask < 0 || mask > 15 || w[3] < INT32_MIN || w[3] > INT32_MAX || o < 1)
    return PRIMC_ERR_RUNTIME;
  r->ibias = (int32_t)w[3];
  double d[18];
  memcpy(d, w + 4, sizeof d);
  r->mul = d[0], r->add = d[1], r->div = d[2], r->zp = d[3], r->lo = d[4], r->hi = d[5];
  /* stage 1's q is an integer an int32 holds; every f32 word an f32 value (a NaN is clamped to lo like any) */
  if (!(r->lo >= -16777216 && r->hi <= 16777216 && r->lo <= r->hi)) return PRIMC_ERR_RUNTIME;
  for (int i = 0; i < 6; i++)
    if (r->kind == PRIMC_CONV_I8_RQ_F32 && !is_f32(d[i]) && d[i] == d[i]) return PRIMC_ERR_RUNTIME;
  for (int i = 6; i < 18; i++) /* the output kinds among them: small integers, f32 values too */
    if (!is_f32(d[i]) && d[i] == d[i]) return PRIMC_ERR_RUNTIME;
  r->z1 = (float)d[6], r->s1 = (float)d[7], r->div2 = (float)d[8], r->zp2 = (float)d[9], r->lo2 = (float)d[10],
  r->hi2 = (float)d[11];
  r->rdiv = 1.0 / r->div, r->rdiv_ok = isnormal(r->rdiv) && isnormal(r->div);
  double lo = mask & PRIMC_CONV_I8_RQ_RES ? d[10] : r->lo, hi = mask & PRIMC_CONV_I8_RQ_RES ? d[11] : r->hi;
  int at = 4;
  for (int i = 0; i < r->n_out; i++) {
    r->out[i].kind = (int)d[12 + 3 * i];
    r->out[i].zsub = (float)d[13 + 3 * i], r->out[i].smul = (float)d[14 + 3 * i];
    if (d[12 + 3 * i] != r->out[i].kind || r->out[i].kind < PRIMC_CONV_I8_OUT_U8 || r->out[i].kind > PRIMC_CONV_I8_OUT_I32 ||
        !fits_out(r->out[i].kind, lo, hi))
      return PRIMC_ERR_RUNTIME;
    r->out[i].y = bufs[at++];
  }
  if (mask & PRIMC_CONV_I8_RQ_IBIAS) r->ib = bufs[at++];
  if (mask & PRIMC_CONV_I8_RQ_MUL) r->vmul = bufs[at++];
  if (mask & PRIMC_CONV_I8_RQ_ADD) r->vadd = bufs[at++];
  if (mask & PRIMC_CONV_I8_RQ_RES) r->res = bufs[at++];
  for (int i = 4; i < at; i++)
    if (!bufs[i]) return PRIMC_ERR_RUNTIME;
  return PRIMC_OK;
}

/* channel o's operands in f32 / f64 */
static inline float mul32(const primc_i8_rq *r, int64_t o) { return r->vmul ? ((const float *)r->vmul)[o] : (float)r->mul; }
static inline float add32(const primc_i8_rq *r, int64_t o) { return r->vadd ? ((const float *)r->vadd)[o] : (float)r->add; }
static inline double mul64(const primc_i8_rq *r, int64_t o) { return r->vmul ? ((const double *)r->vmul)[o] : r->mul; }
static inline double add64(const primc_i8_rq *r, int64_t o) { return r->vadd ? ((const double *)r->vadd)[o] : r->add; }
static inline int32_t ibias(const primc_i8_rq *r, int64_t o) { return r->ib ? r->ib[o] : r->ibias; }

/* one sum of channel o through stage 1 (clamped as max(x, lo) then min(x, hi): a NaN becomes lo) */
static inline int32_t rq_one(const primc_i8_rq *r, int32_t acc, int64_t o) {
  int32_t v = (int32_t)((uint32_t)acc + (uint32_t)ibias(r, o)); /* the prims' int32 sum wraps */
  double x;
  if (r->kind == PRIMC_CONV_I8_RQ_F32) {
    float f = (float)v * mul32(r, o);
    f = f + add32(r, o);
    f = f / (float)r->div;
    f = nearbyintf(f) + (float)r->zp; /* the default rounding: to nearest, ties to even */
    x = f;
  } else {
    x = (double)v * mul64(r, o);
    x = x + add64(r, o);
    x = x / r->div;
    x = nearbyint(x) + r->zp;
  }
  x = x > r->lo ? x : r->lo;
  x = x < r->hi ? x : r->hi;
  return (int32_t)x;
}

/* stage 2 of q at output element e, then every output's element e */
static inline void finish(const primc_i8_rq *r, int32_t q1, int64_t e) {
  float q = (float)q1;
  if (r->res) {
    float f = (q - r->z1) * r->s1;
    f = (f + r->res[e]) / r->div2;
    f = nearbyintf(f) + r->zp2;
    f = f > r->lo2 ? f : r->lo2;
    q = f < r->hi2 ? f : r->hi2;
  }
  for (int i = 0; i < r->n_out; i++) {
    if (r->out[i].kind == PRIMC_CONV_I8_OUT_U8) ((uint8_t *)r->out[i].y)[e] = (uint8_t)(int32_t)q;
    else if (r->out[i].kind == PRIMC_CONV_I8_OUT_S8) ((int8_t *)r->out[i].y)[e] = (int8_t)(int32_t)q;
    else if (r->out[i].kind == PRIMC_CONV_I8_OUT_I32) ((int32_t *)r->out[i].y)[e] = (int32_t)q;
    else ((float *)r->out[i].y)[e] = (q - r->out[i].zsub) * r->out[i].smul;
  }
}

typedef struct rq_job {
  const primc_i8_rq *r;
  const int32_t *acc;
  int64_t p, og, o0, yat; /* pixels, the group's channels, its first channel, the group's first output element */
} rq_job;

/* pixel blocks [b, e) of 64, element by element (their sums stay in L1 across channels) */
static void rq_blocks(void *ctx, int64_t b, int64_t e) {
  const rq_job *j = ctx;
  for (int64_t m0 = b * 64; m0 < e * 64 && m0 < j->p; m0 += 64) {
    int64_t m1 = m0 + 64 < j->p ? m0 + 64 : j->p;
    for (int64_t o = 0; o < j->og; o++)
      for (int64_t m = m0; m < m1; m++) finish(j->r, rq_one(j->r, j->acc[m * j->og + o], j->o0 + o), j->yat + o * j->p + m);
  }
}

#if PRIMC_X86
#include "runtime/avx2.h"
#include <immintrin.h>

/* 8 sums of channels o .. o + 7 (one pixel) requantized as rq_one does, lane by lane */
__attribute__((target("avx2"), always_inline)) static inline __m256i rq8(int kind, __m256i v, __m256i ib, const __m256 *c32,
                                                                         const __m256d *c64) {
  v = _mm256_add_epi32(v, ib);
  enum { RND = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC }; /* an immediate: clang wants a constant expression */
  if (kind == PRIMC_CONV_I8_RQ_F32) {
    __m256 f = _mm256_mul_ps(_mm256_cvtepi32_ps(v), c32[0]);
    f = _mm256_div_ps(_mm256_add_ps(f, c32[1]), c32[2]);
    f = _mm256_add_ps(_mm256_round_ps(f, RND), c32[3]);
    f = _mm256_min_ps(_mm256_max_ps(f, c32[4]), c32[5]); /* maxps gives its second operand for a NaN: lo */
    return _mm256_cvttps_epi32(f);
  }
  __m128i h[2] = {_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1)};
  for (int i = 0; i < 2; i++) {
    __m256d x = _mm256_mul_pd(_mm256_cvtepi32_pd(h[i]), c64[i]);
    x = _mm256_div_pd(_mm256_add_pd(x, c64[2 + i]), c64[4]);
    x = _mm256_add_pd(_mm256_round_pd(x, RND), c64[5]);
    h[i] = _mm256_cvttpd_epi32(_mm256_min_pd(_mm256_max_pd(x, c64[6]), c64[7]));
  }
  return _mm256_set_m128i(h[1], h[0]);
}

/* finish for 8 elements from e on (q1: stage 1's values) */
__attribute__((target("avx2"), always_inline)) static inline void finish8(const primc_i8_rq *r, __m256i q1, int64_t e) {
  __m256 q = _mm256_cvtepi32_ps(q1);
  if (r->res) {
    __m256 f = _mm256_mul_ps(_mm256_sub_ps(q, _mm256_set1_ps(r->z1)), _mm256_set1_ps(r->s1));
    f = _mm256_div_ps(_mm256_add_ps(f, _mm256_loadu_ps(r->res + e)), _mm256_set1_ps(r->div2));
    f = _mm256_add_ps(_mm256_round_ps(f, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC), _mm256_set1_ps(r->zp2));
    q = _mm256_min_ps(_mm256_max_ps(f, _mm256_set1_ps(r->lo2)), _mm256_set1_ps(r->hi2));
  }
  for (int i = 0; i < r->n_out; i++) {
    if (r->out[i].kind == PRIMC_CONV_I8_OUT_F32) {
      __m256 d = _mm256_mul_ps(_mm256_sub_ps(q, _mm256_set1_ps(r->out[i].zsub)), _mm256_set1_ps(r->out[i].smul));
      _mm256_storeu_ps((float *)r->out[i].y + e, d);
      continue;
    }
    __m256i v = _mm256_cvttps_epi32(q);
    if (r->out[i].kind == PRIMC_CONV_I8_OUT_I32) {
      _mm256_storeu_si256((__m256i *)((int32_t *)r->out[i].y + e), v);
      continue;
    }
    __m128i w16 = _mm_packs_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    __m128i w8 = r->out[i].kind == PRIMC_CONV_I8_OUT_U8 ? _mm_packus_epi16(w16, w16) : _mm_packs_epi16(w16, w16);
    _mm_storel_epi64((__m128i *)((char *)r->out[i].y + e), w8);
  }
}

/* rq_blocks as 8 x 8 blocks: each pixel's 8 channels requantized in a vector, transposed in registers, each
 * channel's 8 pixels stored as 8 bytes; the last pixels and channels one by one. kind a constant where inlined */
__attribute__((target("avx2"), always_inline)) static inline void rq_blocks_kind(const rq_job *j, int64_t b, int64_t e,
                                                                                int kind, int64_t o_from) {
  const primc_i8_rq *r = j->r;
  for (int64_t m0 = b * 64; m0 < e * 64 && m0 < j->p; m0 += 64) {
    int64_t m1 = m0 + 64 < j->p ? m0 + 64 : j->p, m8 = m0 + (m1 - m0) / 8 * 8, o0 = o_from;
    for (; o0 + 8 <= j->og; o0 += 8) {
      int64_t o = j->o0 + o0;
      __m256i ib = r->ib ? _mm256_loadu_si256((const __m256i *)(r->ib + o)) : _mm256_set1_epi32(r->ibias);
      __m256 c32[6] = {0};
      __m256d c64[8] = {0};
      if (kind == PRIMC_CONV_I8_RQ_F32) {
        c32[0] = r->vmul ? _mm256_loadu_ps((const float *)r->vmul + o) : _mm256_set1_ps((float)r->mul);
        c32[1] = r->vadd ? _mm256_loadu_ps((const float *)r->vadd + o) : _mm256_set1_ps((float)r->add);
        c32[2] = _mm256_set1_ps((float)r->div), c32[3] = _mm256_set1_ps((float)r->zp);
        c32[4] = _mm256_set1_ps((float)r->lo), c32[5] = _mm256_set1_ps((float)r->hi);
      } else {
        for (int i = 0; i < 2; i++) {
          c64[i] = r->vmul ? _mm256_loadu_pd((const double *)r->vmul + o + 4 * i) : _mm256_set1_pd(r->mul);
          c64[2 + i] = r->vadd ? _mm256_loadu_pd((const double *)r->vadd + o + 4 * i) : _mm256_set1_pd(r->add);
        }
        c64[4] = _mm256_set1_pd(r->div), c64[5] = _mm256_set1_pd(r->zp);
        c64[6] = _mm256_set1_pd(r->lo), c64[7] = _mm256_set1_pd(r->hi);
      }
      for (int64_t m = m0; m < m8; m += 8) {
        __m256 t[8];
        for (int i = 0; i < 8; i++)
          t[i] = _mm256_castsi256_ps(rq8(kind, _mm256_loadu_si256((const __m256i *)(j->acc + (m + i) * j->og + o0)), ib, c32, c64));
        primc_tr8(t);
        for (int c = 0; c < 8; c++) finish8(r, _mm256_castps_si256(t[c]), j->yat + (o0 + c) * j->p + m);
      }
    }
    for (int64_t o = o_from; o < j->og; o++)
      for (int64_t m = o < o0 ? m8 : m0; m < m1; m++)
        finish(r, rq_one(r, j->acc[m * j->og + o], j->o0 + o), j->yat + o * j->p + m);
  }
}

__attribute__((target("avx2"))) static void rq_blocks256(void *ctx, int64_t b, int64_t e) {
  const rq_job *j = ctx;
  if (j->r->kind == PRIMC_CONV_I8_RQ_F32) rq_blocks_kind(j, b, e, PRIMC_CONV_I8_RQ_F32, 0);
  else rq_blocks_kind(j, b, e, PRIMC_CONV_I8_RQ_F64, 0);
}

/* ---------------------------------------------------------------- the same in zmm: 16 channels x 16 pixels */

#include "runtime/avx512.h"
#define RQ512 __attribute__((target("avx512f,avx2")))

/* roundscale(x / d) (to nearest, ties to even) as the division gives it: x times rd = 1 / d, dividing only the lanes
 * within reach of a half, where the product's error (under 2^-51 of |q|; 2^-53 in q - floor(q) below 0) could move
 * a tie; every lane divides where 1 / d is no normal number. vdivpd was half of a QLinearConv's time (3x3 64 -> 64
 * at 56x56, f64 words, on an AMX Xeon: 0.275 -> 0.253 ms). Not for f32 words: vdivps costs half as much per element,
 * and the checks lost 3.6% on a QDQ ResNet-18. */
RQ512 __attribute__((always_inline)) static inline __m512d div_round_pd(__m512d x, __m512d d, __m512d rd, int exact) {
  enum { RND = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC, DOWN = _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC };
  if (exact) return _mm512_roundscale_pd(_mm512_div_pd(x, d), RND);
  __m512d q = _mm512_mul_pd(x, rd);
  __m512d t = _mm512_sub_pd(_mm512_sub_pd(q, _mm512_roundscale_pd(q, DOWN)), _mm512_set1_pd(0.5));
  __m512d reach = _mm512_fmadd_pd(_mm512_abs_pd(q), _mm512_set1_pd(0x1p-48), _mm512_set1_pd(0x1p-50));
  __mmask8 near = _mm512_cmp_pd_mask(_mm512_abs_pd(t), reach, _CMP_LE_OQ);
  if (near) q = _mm512_mask_div_pd(q, near, x, d);
  return _mm512_roundscale_pd(q, RND);
}

/* rq8 on 16 channels */
RQ512 __attribute__((always_inline)) static inline __m512i rq16(int kind, __m512i v, __m512i ib, const __m512 *c32,
                                                                const __m512d *c64, int exact) {
  v = _mm512_add_epi32(v, ib);
  enum { RND = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC };
  if (kind == PRIMC_CONV_I8_RQ_F32) {
    __m512 f = _mm512_mul_ps(_mm512_cvtepi32_ps(v), c32[0]);
    f = _mm512_div_ps(_mm512_add_ps(f, c32[1]), c32[2]);
    f = _mm512_add_ps(_mm512_roundscale_ps(f, RND), c32[3]);
    f = _mm512_min_ps(_mm512_max_ps(f, c32[4]), c32[5]); /* maxps gives its second operand for a NaN: lo */
    return _mm512_cvttps_epi32(f);
  }
  __m256i h[2] = {_mm512_castsi512_si256(v), _mm512_extracti64x4_epi64(v, 1)};
  for (int i = 0; i < 2; i++) {
    __m512d x = _mm512_mul_pd(_mm512_cvtepi32_pd(h[i]), c64[i]);
    x = _mm512_add_pd(div_round_pd(_mm512_add_pd(x, c64[2 + i]), c64[4], c64[8], exact), c64[5]);
    h[i] = _mm512_cvttpd_epi32(_mm512_min_pd(_mm512_max_pd(x, c64[6]), c64[7]));
  }
  return _mm512_inserti64x4(_mm512_castsi256_si512(h[0]), h[1], 1);
}

/* finish8 on 16 elements (q1 within the output kinds' ranges: primc_i8_rq_read's fits_out) */
RQ512 __attribute__((always_inline)) static inline void finish16(const primc_i8_rq *r, __m512i q1, int64_t e) {
  __m512 q = _mm512_cvtepi32_ps(q1);
  if (r->res) {
    __m512 f = _mm512_mul_ps(_mm512_sub_ps(q, _mm512_set1_ps(r->z1)), _mm512_set1_ps(r->s1));
    f = _mm512_div_ps(_mm512_add_ps(f, _mm512_loadu_ps(r->res + e)), _mm512_set1_ps(r->div2));
    f = _mm512_add_ps(_mm512_roundscale_ps(f, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC), _mm512_set1_ps(r->zp2));
    q = _mm512_min_ps(_mm512_max_ps(f, _mm512_set1_ps(r->lo2)), _mm512_set1_ps(r->hi2));
  }
  for (int i = 0; i < r->n_out; i++) {
    if (r->out[i].kind == PRIMC_CONV_I8_OUT_F32) {
      __m512 d = _mm512_mul_ps(_mm512_sub_ps(q, _mm512_set1_ps(r->out[i].zsub)), _mm512_set1_ps(r->out[i].smul));
      _mm512_storeu_ps((float *)r->out[i].y + e, d);
      continue;
    }
    __m512i v = _mm512_cvttps_epi32(q);
    if (r->out[i].kind == PRIMC_CONV_I8_OUT_I32) _mm512_storeu_si512((int32_t *)r->out[i].y + e, v);
    else if (r->out[i].kind == PRIMC_CONV_I8_OUT_U8) _mm_storeu_si128((__m128i *)((char *)r->out[i].y + e), _mm512_cvtusepi32_epi8(v));
    else _mm_storeu_si128((__m128i *)((char *)r->out[i].y + e), _mm512_cvtsepi32_epi8(v));
  }
}

/* rq_blocks as 16 x 16 blocks (transposed in registers); channels past the last 16 on the ymm blocks */
RQ512 __attribute__((always_inline)) static inline void rq_blocks512_kind(const rq_job *j, int64_t b, int64_t e,
                                                                          int kind) {
  const primc_i8_rq *r = j->r;
  int64_t o16 = j->og / 16 * 16;
  for (int64_t m0 = b * 64; m0 < e * 64 && m0 < j->p; m0 += 64) {
    int64_t m1 = m0 + 64 < j->p ? m0 + 64 : j->p, m16 = m0 + (m1 - m0) / 16 * 16;
    for (int64_t o0 = 0; o0 < o16; o0 += 16) {
      int64_t o = j->o0 + o0;
      __m512i ib = r->ib ? _mm512_loadu_si512(r->ib + o) : _mm512_set1_epi32(r->ibias);
      __m512 c32[6] = {0};
      __m512d c64[9] = {0};
      if (kind == PRIMC_CONV_I8_RQ_F32) {
        c32[0] = r->vmul ? _mm512_loadu_ps((const float *)r->vmul + o) : _mm512_set1_ps((float)r->mul);
        c32[1] = r->vadd ? _mm512_loadu_ps((const float *)r->vadd + o) : _mm512_set1_ps((float)r->add);
        c32[2] = _mm512_set1_ps((float)r->div), c32[3] = _mm512_set1_ps((float)r->zp);
        c32[4] = _mm512_set1_ps((float)r->lo), c32[5] = _mm512_set1_ps((float)r->hi);
      } else {
        for (int i = 0; i < 2; i++) {
          c64[i] = r->vmul ? _mm512_loadu_pd((const double *)r->vmul + o + 8 * i) : _mm512_set1_pd(r->mul);
          c64[2 + i] = r->vadd ? _mm512_loadu_pd((const double *)r->vadd + o + 8 * i) : _mm512_set1_pd(r->add);
        }
        c64[4] = _mm512_set1_pd(r->div), c64[5] = _mm512_set1_pd(r->zp);
        c64[6] = _mm512_set1_pd(r->lo), c64[7] = _mm512_set1_pd(r->hi), c64[8] = _mm512_set1_pd(r->rdiv);
      }
      for (int64_t m = m0; m < m16; m += 16) {
        __m512 t[16];
#pragma GCC unroll 16
        for (int i = 0; i < 16; i++)
          t[i] = _mm512_castsi512_ps(
              rq16(kind, _mm512_loadu_si512(j->acc + (m + i) * j->og + o0), ib, c32, c64, !r->rdiv_ok));
        primc_tr16(t);
#pragma GCC unroll 16
        for (int c = 0; c < 16; c++) finish16(r, _mm512_castps_si512(t[c]), j->yat + (o0 + c) * j->p + m);
      }
      for (int64_t c = o0; c < o0 + 16; c++)
        for (int64_t m = m16; m < m1; m++) finish(r, rq_one(r, j->acc[m * j->og + c], j->o0 + c), j->yat + c * j->p + m);
    }
  }
  if (o16 < j->og) rq_blocks_kind(j, b, e, kind, o16);
}

RQ512 static void rq_blocks512(void *ctx, int64_t b, int64_t e) {
  const rq_job *j = ctx;
  if (j->r->kind == PRIMC_CONV_I8_RQ_F32) rq_blocks512_kind(j, b, e, PRIMC_CONV_I8_RQ_F32);
  else rq_blocks512_kind(j, b, e, PRIMC_CONV_I8_RQ_F64);
}
#endif

void primc_i8_rq_out(const primc_i8_rq *r, const int32_t *acc, int64_t p, int64_t og, int64_t o0, int64_t yat) {
  rq_job j = {r, acc, p, og, o0, yat};
  void (*fn)(void *, int64_t, int64_t) = rq_blocks;
#if PRIMC_X86
  int isa = primc_sgemm_isa();
  if (primc_isa_covers(isa, PRIMC_ISA_AVX2) && !__atomic_load_n(&portable, __ATOMIC_RELAXED))
    fn = isa == PRIMC_ISA_AVX512 ? rq_blocks512 : rq_blocks256;
#endif
  if ((double)p * (double)og < (1 << 16)) fn(&j, 0, (p + 63) / 64);
  else primc_parallel_for((p + 63) / 64, fn, &j);
}
