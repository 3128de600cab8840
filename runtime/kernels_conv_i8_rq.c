/* runtime/kernels_conv_i8_rq.c: a conv_i8 call's requantized result: the GEMM's [pixels][channels] int32 sums
 * turned into the NCHW u8 / s8 output in one pass (the words at PRIMC_CONV_I8_RQ_AT), instead of an int32 NCHW
 * result that a loop kernel reads again to requantize. The arithmetic is the loop kernel's, operation for operation
 * in the same type, so the bytes are the same. */
#include "runtime/kernels.h"

static int portable; /* tests: the element-by-element path on every CPU */
void primc_conv_i8_rq_force_portable(int on) { __atomic_store_n(&portable, on != 0, __ATOMIC_RELAXED); }

int primc_i8_rq_read(const int64_t *w, void *const *bufs, int64_t o, primc_i8_rq *r) {
  memset(r, 0, sizeof *r);
  r->kind = (int)w[0];
  if (r->kind == PRIMC_CONV_I8_RQ_NONE) return PRIMC_OK;
  int64_t mask = w[2];
  if ((r->kind != PRIMC_CONV_I8_RQ_F32 && r->kind != PRIMC_CONV_I8_RQ_F64) || (w[1] != PRIMC_U8 && w[1] != PRIMC_I8) ||
      mask < 0 || mask > 7 || w[3] < INT32_MIN || w[3] > INT32_MAX || o < 1)
    return PRIMC_ERR_RUNTIME;
  r->u8 = w[1] == PRIMC_U8;
  r->ibias = (int32_t)w[3];
  double *d[6] = {&r->mul, &r->add, &r->div, &r->zp, &r->lo, &r->hi};
  for (int i = 0; i < 6; i++) memcpy(d[i], &w[4 + i], 8);
  /* the bounds hold every value a conversion to the type may see; a NaN bound or scalar fails the checks below or
   * is clamped to lo like any NaN */
  double tlo = r->u8 ? 0 : -128, thi = r->u8 ? 255 : 127;
  if (!(r->lo >= tlo && r->hi <= thi && r->lo <= r->hi)) return PRIMC_ERR_RUNTIME;
  if (r->kind == PRIMC_CONV_I8_RQ_F32) /* f32 arithmetic: the words are f32 values */
    for (int i = 0; i < 6; i++)
      if ((double)(float)*d[i] != *d[i] && *d[i] == *d[i]) return PRIMC_ERR_RUNTIME;
  int at = 5;
  if (mask & PRIMC_CONV_I8_RQ_IBIAS) r->ib = bufs[at++];
  if (mask & PRIMC_CONV_I8_RQ_MUL) r->vmul = bufs[at++];
  if (mask & PRIMC_CONV_I8_RQ_ADD) r->vadd = bufs[at++];
  r->y = bufs[4];
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

/* one sum of channel o, requantized (clamped as max(x, lo) then min(x, hi): a NaN becomes lo) */
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

static inline void put(const primc_i8_rq *r, int64_t at, int32_t v) {
  if (r->u8) ((uint8_t *)r->y)[at] = (uint8_t)v;
  else ((int8_t *)r->y)[at] = (int8_t)v;
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
      for (int64_t m = m0; m < m1; m++) put(j->r, j->yat + o * j->p + m, rq_one(j->r, j->acc[m * j->og + o], j->o0 + o));
  }
}

#if PRIMC_X86
#include "runtime/avx2.h"
#include <immintrin.h>

/* 8 sums of channels o .. o + 7 (one pixel) requantized as rq_one does, lane by lane */
__attribute__((target("avx2"), always_inline)) static inline __m256i rq8(int kind, __m256i v, __m256i ib, const __m256 *c32,
                                                                         const __m256d *c64) {
  v = _mm256_add_epi32(v, ib);
  const int rnd = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;
  if (kind == PRIMC_CONV_I8_RQ_F32) {
    __m256 f = _mm256_mul_ps(_mm256_cvtepi32_ps(v), c32[0]);
    f = _mm256_div_ps(_mm256_add_ps(f, c32[1]), c32[2]);
    f = _mm256_add_ps(_mm256_round_ps(f, rnd), c32[3]);
    f = _mm256_min_ps(_mm256_max_ps(f, c32[4]), c32[5]); /* maxps gives its second operand for a NaN: lo */
    return _mm256_cvttps_epi32(f);
  }
  __m128i h[2] = {_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1)};
  for (int i = 0; i < 2; i++) {
    __m256d x = _mm256_mul_pd(_mm256_cvtepi32_pd(h[i]), c64[i]);
    x = _mm256_div_pd(_mm256_add_pd(x, c64[2 + i]), c64[4]);
    x = _mm256_add_pd(_mm256_round_pd(x, rnd), c64[5]);
    h[i] = _mm256_cvttpd_epi32(_mm256_min_pd(_mm256_max_pd(x, c64[6]), c64[7]));
  }
  return _mm256_set_m128i(h[1], h[0]);
}

/* rq_blocks as 8 x 8 blocks: each pixel's 8 channels requantized in a vector, transposed in registers, each
 * channel's 8 pixels stored as 8 bytes; the last pixels and channels one by one. kind a constant where inlined */
__attribute__((target("avx2"), always_inline)) static inline void rq_blocks_kind(const rq_job *j, int64_t b, int64_t e,
                                                                                int kind) {
  const primc_i8_rq *r = j->r;
  for (int64_t m0 = b * 64; m0 < e * 64 && m0 < j->p; m0 += 64) {
    int64_t m1 = m0 + 64 < j->p ? m0 + 64 : j->p, m8 = m0 + (m1 - m0) / 8 * 8, o0 = 0;
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
        for (int c = 0; c < 8; c++) {
          __m256i v = _mm256_castps_si256(t[c]);
          __m128i w16 = _mm_packs_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
          __m128i w8 = r->u8 ? _mm_packus_epi16(w16, w16) : _mm_packs_epi16(w16, w16);
          _mm_storel_epi64((__m128i *)((char *)r->y + j->yat + (o0 + c) * j->p + m), w8);
        }
      }
    }
    for (int64_t o = 0; o < j->og; o++)
      for (int64_t m = o < o0 ? m8 : m0; m < m1; m++)
        put(r, j->yat + o * j->p + m, rq_one(r, j->acc[m * j->og + o], j->o0 + o));
  }
}

__attribute__((target("avx2"))) static void rq_blocks256(void *ctx, int64_t b, int64_t e) {
  const rq_job *j = ctx;
  if (j->r->kind == PRIMC_CONV_I8_RQ_F32) rq_blocks_kind(j, b, e, PRIMC_CONV_I8_RQ_F32);
  else rq_blocks_kind(j, b, e, PRIMC_CONV_I8_RQ_F64);
}
#endif

void primc_i8_rq_out(const primc_i8_rq *r, const int32_t *acc, int64_t p, int64_t og, int64_t o0, int64_t yat) {
  rq_job j = {r, acc, p, og, o0, yat};
  void (*fn)(void *, int64_t, int64_t) = rq_blocks;
#if PRIMC_X86
  if (primc_isa_covers(primc_sgemm_isa(), PRIMC_ISA_AVX2) && !__atomic_load_n(&portable, __ATOMIC_RELAXED))
    fn = rq_blocks256;
#endif
  if ((double)p * (double)og < (1 << 16)) fn(&j, 0, (p + 63) / 64);
  else primc_parallel_for((p + 63) / 64, fn, &j);
}
