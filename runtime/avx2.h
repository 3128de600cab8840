/* runtime/avx2.h: in-register AVX2 helpers the GEMM and the convs share (internal to the runtime). */
#ifndef PRIMC_RUNTIME_AVX2_H
#define PRIMC_RUNTIME_AVX2_H

#include <immintrin.h>
#include <stdint.h>

/* *acc += w * b as one vfmadd231ps on acc's register. In unrolled loops GCC rotates the sums through vfmadd132ps,
 * moves and spills instead, each a slot of an issue width that a core shared with another thread (these VMs'
 * vCPUs) runs short of (bench/gemm_rows.md) */
__attribute__((target("avx2,fma"))) static inline __attribute__((always_inline)) void primc_fma231(__m256 *acc, __m256 w,
                                                                                                 __m256 b) {
  __asm__("vfmadd231ps %1, %2, %0" : "+x"(*acc) : "x"(w), "x"(b));
}

/* r[j] = column j of the 8 x 8 block in r: rows interleaved in pairs, then pairs of pairs, then 128-bit halves */
__attribute__((target("avx2"))) static inline __attribute__((always_inline)) void primc_tr8(__m256 r[8]) {
  __m256 t[8], s[8];
  /* the loops unrolled, else GCC at -O2 kept t and s on the stack (half of a 14x14 depthwise conv's time) */
#pragma GCC unroll 4
  for (int i = 0; i < 4; i++) {
    t[2 * i] = _mm256_unpacklo_ps(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm256_unpackhi_ps(r[2 * i], r[2 * i + 1]);
  }
#pragma GCC unroll 2
  for (int h = 0; h < 2; h++) { /* rows 0-3, then 4-7 */
    s[4 * h] = _mm256_shuffle_ps(t[4 * h], t[4 * h + 2], _MM_SHUFFLE(1, 0, 1, 0));
    s[4 * h + 1] = _mm256_shuffle_ps(t[4 * h], t[4 * h + 2], _MM_SHUFFLE(3, 2, 3, 2));
    s[4 * h + 2] = _mm256_shuffle_ps(t[4 * h + 1], t[4 * h + 3], _MM_SHUFFLE(1, 0, 1, 0));
    s[4 * h + 3] = _mm256_shuffle_ps(t[4 * h + 1], t[4 * h + 3], _MM_SHUFFLE(3, 2, 3, 2));
  }
#pragma GCC unroll 4
  for (int k = 0; k < 4; k++) { /* columns k and k + 4: the low and high 128-bit halves */
    r[k] = _mm256_permute2f128_ps(s[k], s[4 + k], 0x20);
    r[k + 4] = _mm256_permute2f128_ps(s[k], s[4 + k], 0x31);
  }
}

/* the even and the odd lanes of the 16 floats a, b (a's first): one shuffle and one permute each */
__attribute__((target("avx2"))) static inline __attribute__((always_inline)) __m256 primc_even8(__m256 a, __m256 b) {
  return _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(_mm256_shuffle_ps(a, b, _MM_SHUFFLE(2, 0, 2, 0))), 0xD8));
}
__attribute__((target("avx2"))) static inline __attribute__((always_inline)) __m256 primc_odd8(__m256 a, __m256 b) {
  return _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(_mm256_shuffle_ps(a, b, _MM_SHUFFLE(3, 1, 3, 1))), 0xD8));
}

/* the least and greatest of x[0 .. n / 8 * 8), folded into *lo and *hi; the elements taken (the caller folds in the
 * rest). Not always_inline: a caller without the avx2 target calls it */
__attribute__((target("avx2"))) static inline int64_t primc_range_i32_avx2(const int32_t *x, int64_t n, int32_t *lo,
                                                                           int32_t *hi) {
  __m256i vl = _mm256_set1_epi32(*lo), vh = _mm256_set1_epi32(*hi);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256i v = _mm256_loadu_si256((const __m256i *)(x + i));
    vl = _mm256_min_epi32(vl, v), vh = _mm256_max_epi32(vh, v);
  }
  int32_t a[8], b[8];
  _mm256_storeu_si256((__m256i *)a, vl);
  _mm256_storeu_si256((__m256i *)b, vh);
  for (int k = 0; k < 8; k++) *lo = a[k] < *lo ? a[k] : *lo, *hi = b[k] > *hi ? b[k] : *hi;
  return i;
}

/* 16 int32 (v0 the first 8) as 16 bytes in their order, each saturated to [0, 255] */
__attribute__((target("avx2"))) static inline __attribute__((always_inline)) __m128i primc_u8_of_i32x16(__m256i v0,
                                                                                                     __m256i v1) {
  __m256i w = _mm256_permute4x64_epi64(_mm256_packus_epi32(v0, v1), 0xD8);
  return _mm_packus_epi16(_mm256_castsi256_si128(w), _mm256_extracti128_si256(w, 1));
}

/* lanes [0, n) set, for maskload (n <= 0 none, n >= 8 all); not for maskstore, which costs tens of cycles on Zen 3 */
__attribute__((target("avx2"))) static inline __attribute__((always_inline)) __m256i primc_low_mask8(int64_t n) {
  return _mm256_cmpgt_epi32(_mm256_set1_epi32((int)(n < 0 ? 0 : n > 8 ? 8 : n)), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

#endif
