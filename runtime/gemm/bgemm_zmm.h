/* runtime/gemm/bgemm_zmm.h: what the bf16 GEMM's zmm rows share: storing up to 8 rows x 2 zmm of sums, and the dispatch on a call's row count. */
#ifndef PRIMC_BGEMM_ZMM_H
#define PRIMC_BGEMM_ZMM_H

#include "runtime/gemm/bgemm.h"

#include <immintrin.h>

/* acc[r][0..V) into C's rows r < R, columns < nr, added to what C holds when accumulating */
static inline __attribute__((always_inline, target("avx512f"))) void bg_store512(const bkargs *g, __m512 (*acc)[2],
                                                                                 const int R, const int V) {
  const int n0 = V == 2 ? 16 : g->nr, n1 = V == 2 ? g->nr - 16 : 0;
  const __mmask16 m0 = (__mmask16)((1u << n0) - 1), m1 = (__mmask16)((1u << n1) - 1);
#pragma GCC unroll 8
  for (int r = 0; r < R; r++) {
    float *c = g->c + r * g->ldc;
    if (g->accumulate) {
      acc[r][0] = _mm512_add_ps(acc[r][0], _mm512_maskz_loadu_ps(m0, c));
      if (V == 2) acc[r][1] = _mm512_add_ps(acc[r][1], _mm512_maskz_loadu_ps(m1, c + 16));
    }
    _mm512_mask_storeu_ps(c, m0, acc[r][0]);
    if (V == 2) _mm512_mask_storeu_ps(c + 16, m1, acc[r][1]);
  }
}

/* tile(g, R, V) for the call's rows (1..8, each a constant for the register arrays) and 1 or 2 zmm of columns */
#define BG_CASE512(tile, R)                                                                                            \
  case R:                                                                                                              \
    if (g->nr > 16)                                                                                                    \
      tile(g, R, 2);                                                                                                   \
    else                                                                                                               \
      tile(g, R, 1);                                                                                                   \
    break;
#define BG_DISPATCH512(tile)                                                                                           \
  switch (g->mr) {                                                                                                     \
    BG_CASE512(tile, 1) BG_CASE512(tile, 2) BG_CASE512(tile, 3) BG_CASE512(tile, 4) BG_CASE512(tile, 5)                \
    BG_CASE512(tile, 6) BG_CASE512(tile, 7) BG_CASE512(tile, 8)                                                        \
  default:                                                                                                             \
    break;                                                                                                             \
  }

#endif
