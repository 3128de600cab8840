/* runtime/avx512.h: in-register AVX-512 helpers the GEMM and the convs share (internal to the runtime). */
#ifndef PRIMC_RUNTIME_AVX512_H
#define PRIMC_RUNTIME_AVX512_H

#include <immintrin.h>
#include <stdint.h>

/* lanes [0, n) */
static inline __mmask16 primc_low_mask16(int64_t n) {
  return n >= 16 ? (__mmask16)0xffff : n <= 0 ? 0 : (__mmask16)((1u << n) - 1);
}

/* 16 floats to bf16 by the same rule as primc_f32_to_bf16 (kernels.h): to nearest even, NaN quieted */
__attribute__((target("avx512f"))) static inline __m256i primc_bf16_round16(__m512 v) {
  __m512i u = _mm512_castps_si512(v);
  __m512i odd = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
  __m512i r = _mm512_srli_epi32(_mm512_add_epi32(u, _mm512_add_epi32(odd, _mm512_set1_epi32(0x7fff))), 16);
  __m512i mag = _mm512_and_si512(u, _mm512_set1_epi32(0x7fffffff));
  __mmask16 nan = _mm512_cmpgt_epu32_mask(mag, _mm512_set1_epi32(0x7f800000));
  r = _mm512_mask_or_epi32(r, nan, _mm512_srli_epi32(u, 16), _mm512_set1_epi32(0x40));
  return _mm512_cvtepi32_epi16(r);
}

/* the even and the odd lanes of the 32 floats a, b (a's first) */
__attribute__((target("avx512f"))) static inline __m512 primc_even16(__m512 a, __m512 b) {
  return _mm512_permutex2var_ps(a, _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0), b);
}
__attribute__((target("avx512f"))) static inline __m512 primc_odd16(__m512 a, __m512 b) {
  return _mm512_permutex2var_ps(a, _mm512_set_epi32(31, 29, 27, 25, 23, 21, 19, 17, 15, 13, 11, 9, 7, 5, 3, 1), b);
}

/* r[j] = column j of the 16 x 16 block in r (rows 2i, 2i+1 interleaved, then pairs of pairs, then 128-bit lanes) */
__attribute__((target("avx512f"))) static inline __attribute__((always_inline)) void primc_tr16(__m512 r[16]) {
  __m512 t[16];
#pragma GCC unroll 16
  for (int i = 0; i < 8; i++) {
    t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
  }
#pragma GCC unroll 16
  for (int i = 0; i < 4; i++) {
    __m512d a = _mm512_castps_pd(t[4 * i]), b = _mm512_castps_pd(t[4 * i + 2]);
    __m512d c = _mm512_castps_pd(t[4 * i + 1]), d = _mm512_castps_pd(t[4 * i + 3]);
    t[4 * i] = _mm512_castpd_ps(_mm512_unpacklo_pd(a, b));
    t[4 * i + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(a, b));
    t[4 * i + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(c, d));
    t[4 * i + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(c, d));
  }
  /* t[4i + c] holds, in 128-bit lane L, rows 4i..4i+3 at column 4L + c */
#pragma GCC unroll 16
  for (int c = 0; c < 4; c++) {
    __m512 v = _mm512_shuffle_f32x4(t[c], t[4 + c], 0x88), w = _mm512_shuffle_f32x4(t[8 + c], t[12 + c], 0x88);
    __m512 v2 = _mm512_shuffle_f32x4(t[c], t[4 + c], 0xdd), w2 = _mm512_shuffle_f32x4(t[8 + c], t[12 + c], 0xdd);
    r[c] = _mm512_shuffle_f32x4(v, w, 0x88);
    r[8 + c] = _mm512_shuffle_f32x4(v, w, 0xdd);
    r[4 + c] = _mm512_shuffle_f32x4(v2, w2, 0x88);
    r[12 + c] = _mm512_shuffle_f32x4(v2, w2, 0xdd);
  }
}

/* dst[j * ldd + i] = src[i * ld + j] for i < rows, j < cols (both <= 16); lanes i >= rows are not written */
__attribute__((target("avx512f"))) static inline void primc_tr16_part(const float *src, int64_t ld, int rows, int cols,
                                                                      float *dst, int64_t ldd) {
  __m512 r[16];
  __mmask16 mc = primc_low_mask16(cols), mr = primc_low_mask16(rows);
#pragma GCC unroll 16
  for (int i = 0; i < 16; i++) r[i] = i < rows ? _mm512_maskz_loadu_ps(mc, src + i * ld) : _mm512_setzero_ps();
  primc_tr16(r);
#pragma GCC unroll 16
  for (int j = 0; j < cols; j++) _mm512_mask_storeu_ps(dst + j * ldd, mr, r[j]);
}

#endif
