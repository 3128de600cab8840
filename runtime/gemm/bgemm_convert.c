/* runtime/gemm/bgemm_convert.c: the bf16 GEMM's converting rows for CPUs without bf16 arithmetic: bf16 operands widened to f32 in registers (a shift), f32 FMAs, on AVX-512F or AVX2. */
#include "runtime/gemm/bgemm.h"

#if PRIMC_X86
#include "runtime/gemm/bgemm_zmm.h"

#include <immintrin.h>
#include <string.h>

/*
 * A B-panel row holds a k pair of 16 columns as 32-bit words [k odd | k even]: the even k's bf16 widens to f32
 * by a left shift of 16, the odd k's by masking the low half away. Each k pair of a row of A is one 32-bit
 * word too, split the same way and broadcast. The products and sums are those of the bf16 rows (every product
 * of two bf16 values is exact in f32), in another order.
 */

static inline int32_t a_pair(const bkargs *g, int r, int64_t kp) {
  int32_t v;
  memcpy(&v, g->a + bg_a_at(g->lda, r, 2 * kp), sizeof v);
  return v;
}

/* ---------------------------------------------------------------- AVX-512F: up to 8 rows x 2 zmm */

#define F512 __attribute__((target("avx512f")))
#define C5_MR BG_MR_AVX512

static inline __attribute__((always_inline)) F512 void tile512(const bkargs *g, const int R, const int V) {
  __m512 acc[C5_MR][2];
#pragma GCC unroll 8
  for (int r = 0; r < R; r++) acc[r][0] = acc[r][1] = _mm512_setzero_ps();
  const __m512i hi_mask = _mm512_set1_epi32((int)0xffff0000u);
  for (int64_t kp = 0; kp < g->kc / 2; kp++) {
    __m512 be[2], bo[2];
    for (int h = 0; h < V; h++) {
      __m512i w = _mm512_loadu_si512(g->b + bg_b_at(kp, h));
      be[h] = _mm512_castsi512_ps(_mm512_slli_epi32(w, 16));
      bo[h] = _mm512_castsi512_ps(_mm512_and_si512(w, hi_mask));
    }
#pragma GCC unroll 8
    for (int r = 0; r < R; r++) {
      int32_t p = a_pair(g, r, kp);
      __m512 ae = _mm512_castsi512_ps(_mm512_set1_epi32((int32_t)((uint32_t)p << 16)));
      __m512 ao = _mm512_castsi512_ps(_mm512_set1_epi32((int32_t)((uint32_t)p & 0xffff0000u)));
      for (int h = 0; h < V; h++) acc[r][h] = _mm512_fmadd_ps(ao, bo[h], _mm512_fmadd_ps(ae, be[h], acc[r][h]));
    }
  }
  bg_store512(g, acc, R, V);
}

F512 void primc_bg_kern_avx512(const bkargs *g) { BG_DISPATCH512(tile512) }

/* ---------------------------------------------------------------- AVX2: up to 2 rows x 4 ymm */

#define F256 __attribute__((target("avx2,fma")))
#define C2_MR BG_MR_AVX2

static inline __attribute__((always_inline)) F256 void tile256(const bkargs *g, const int R) {
  __m256 acc[C2_MR][4];
  for (int r = 0; r < R; r++)
    for (int q = 0; q < 4; q++) acc[r][q] = _mm256_setzero_ps();
  const __m256i hi_mask = _mm256_set1_epi32((int)0xffff0000u);
  const int V = g->nr > 16 ? 2 : 1;
  for (int64_t kp = 0; kp < g->kc / 2; kp++) {
    int32_t p[C2_MR];
    for (int r = 0; r < R; r++) p[r] = a_pair(g, r, kp);
    for (int h = 0; h < V; h++)
      for (int q = 0; q < 2; q++) {
        __m256i w = _mm256_loadu_si256((const __m256i *)(g->b + bg_b_at(kp, h) + 16 * q));
        __m256 be = _mm256_castsi256_ps(_mm256_slli_epi32(w, 16)), bo = _mm256_castsi256_ps(_mm256_and_si256(w, hi_mask));
        for (int r = 0; r < R; r++) {
          __m256 ae = _mm256_castsi256_ps(_mm256_set1_epi32((int32_t)((uint32_t)p[r] << 16)));
          __m256 ao = _mm256_castsi256_ps(_mm256_set1_epi32((int32_t)((uint32_t)p[r] & 0xffff0000u)));
          acc[r][2 * h + q] = _mm256_fmadd_ps(ao, bo, _mm256_fmadd_ps(ae, be, acc[r][2 * h + q]));
        }
      }
  }
  for (int r = 0; r < R; r++) {
    float out[32];
    for (int q = 0; q < 4; q++) _mm256_storeu_ps(out + 8 * q, acc[r][q]);
    float *c = g->c + r * g->ldc;
    for (int j = 0; j < g->nr; j++) c[j] = g->accumulate ? c[j] + out[j] : out[j];
  }
}

F256 void primc_bg_kern_avx2(const bkargs *g) {
  if (g->mr == 2)
    tile256(g, 2);
  else
    tile256(g, 1);
}

#else
/* not x86: the converting bf16 rows never runs here (its ISA is never covered), but the row table names it */
void primc_bg_kern_avx512(const bkargs *g) { __builtin_trap(); }
void primc_bg_kern_avx2(const bkargs *g) { __builtin_trap(); }
#endif
