/* runtime/attention_avx2.c: the fused attention call's AVX2 row: the AVX-512 row's tiles in ymm, each vector of
 * 16 queries as two ymm, 6 keys (or dv columns) x 16 queries in 12 accumulators, as the AVX2 GEMM row's 6 x 16
 * tile (runtime/gemm/avx2.c). A block of more than 16 queries runs its vectors one after the other: the
 * broadcasts are reread from L1, and 16 ymm hold no larger block. */
#include "runtime/attention.h"
#include "runtime/arch.h"

#if PRIMC_X86
#include <immintrin.h>
#include <math.h>
#include <string.h>

#define AVX2 __attribute__((target("avx2,fma")))
#define INLINE static inline __attribute__((always_inline))
#define RK2 6 /* broadcast rows a register block */

/* e^x for x <= 0 as the AVX-512 row's exp512 (the same polynomial), 2^n made in the exponent bits: after the
 * clamp n >= -126, a normal float; 0 below -87.3 and for NaN */
AVX2 INLINE __m256 exp256(__m256 x) {
  const __m256 lo = _mm256_set1_ps(-87.3f);
  __m256 live = _mm256_cmp_ps(x, lo, _CMP_GE_OQ);
  x = _mm256_max_ps(x, lo);
  __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504f)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693145752f), x);
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(1.42860677e-6f), r);
  __m256 p = _mm256_set1_ps(1.98756912e-4f);
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.39819994e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.33345205e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.16657962e-2f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.66666672e-1f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(0.5f));
  p = _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
  __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
  return _mm256_and_ps(live, _mm256_mul_ps(p, _mm256_castsi256_ps(e)));
}

/* the scores of key n for lanes [l0, l0 + 8) with the mask added (gathered when it varies along the queries,
 * only the live lanes read) and the causal cut */
AVX2 INLINE __m256 masked256(const att_blk *b, int64_t n, int l0, __m256 x) {
  const __m256i lane = _mm256_add_epi32(_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7), _mm256_set1_epi32(l0));
  if (b->M) {
    const float *m = b->M + b->m0 * b->msq + n * b->msk;
    if (b->msq) {
      __m256 live = _mm256_castsi256_ps(_mm256_cmpgt_epi32(_mm256_set1_epi32((int32_t)b->rows), lane));
      __m256i at = _mm256_mullo_epi32(lane, _mm256_set1_epi32((int32_t)b->msq));
      x = _mm256_add_ps(x, _mm256_mask_i32gather_ps(_mm256_setzero_ps(), m, at, live, 4));
    } else {
      x = _mm256_add_ps(x, _mm256_set1_ps(*m));
    }
  }
  if (b->causal) {
    __m256 cut = _mm256_castsi256_ps(_mm256_cmpgt_epi32(_mm256_set1_epi32((int32_t)(n - b->m0)), lane));
    x = _mm256_blendv_ps(x, _mm256_set1_ps(-INFINITY), cut);
  }
  return x;
}

/* S^T rows [n, n + R), queries [16 v, 16 v + 16): R keys broadcast from K where they lie, per d; stored with
 * the mask applied, into the tile's running max */
AVX2 INLINE void qk_block(att_blk *b, int64_t n, int v, const int R, const int V) {
  __m256 c[RK2][2];
  const float *kp[RK2];
#pragma GCC unroll 6
  for (int r = 0; r < R; r++) {
    kp[r] = b->K + (n + r) * b->ksk;
    c[r][0] = c[r][1] = _mm256_setzero_ps();
  }
  const float *qt = b->qt + 16 * v;
  for (int64_t d = 0, off = 0; d < b->d; d++, off += b->ksd, qt += 16 * V) {
    __m256 x0 = _mm256_load_ps(qt), x1 = _mm256_load_ps(qt + 8);
#pragma GCC unroll 6
    for (int r = 0; r < R; r++) {
      __m256 a = _mm256_broadcast_ss(kp[r] + off);
      c[r][0] = _mm256_fmadd_ps(a, x0, c[r][0]);
      c[r][1] = _mm256_fmadd_ps(a, x1, c[r][1]);
    }
  }
  float *s = b->s + (n % KT) * (16 * V) + 16 * v, *tmx = b->tmx + 16 * v;
  __m256 mx0 = _mm256_loadu_ps(tmx), mx1 = _mm256_loadu_ps(tmx + 8);
  int masked = b->M || b->causal;
#pragma GCC unroll 6
  for (int r = 0; r < R; r++) {
    __m256 x0 = masked ? masked256(b, n + r, 16 * v, c[r][0]) : c[r][0];
    __m256 x1 = masked ? masked256(b, n + r, 16 * v + 8, c[r][1]) : c[r][1];
    _mm256_store_ps(s + r * (16 * V), x0);
    _mm256_store_ps(s + r * (16 * V) + 8, x1);
    mx0 = _mm256_max_ps(mx0, x0);
    mx1 = _mm256_max_ps(mx1, x1);
  }
  _mm256_storeu_ps(tmx, mx0);
  _mm256_storeu_ps(tmx + 8, mx1);
}

AVX2 INLINE void scores_256(att_blk *b, int64_t n0, int64_t nk, const int V) {
  memcpy(b->tmx, b->mx, sizeof b->tmx);
  for (int v = 0; v < V; v++) {
    int64_t n = n0, end = n0 + nk;
    for (; n + RK2 <= end; n += RK2) qk_block(b, n, v, RK2, V);
    switch (end - n) { /* the remainder, fewer rows */
    case 5: qk_block(b, n, v, 5, V); break;
    case 4: qk_block(b, n, v, 4, V); break;
    case 3: qk_block(b, n, v, 3, V); break;
    case 2: qk_block(b, n, v, 2, V); break;
    case 1: qk_block(b, n, v, 1, V); break;
    }
  }
}
_Static_assert(RK2 == 6, "the remainders' switches");

/* P^T = exp(S^T - the new max), the sums; the accumulator rescaled where the max grew */
AVX2 INLINE void softmax_256(att_blk *b, int64_t nk, const int V) {
  enum { W = 8 }; /* ymm per 16 vq lanes, at most */
  __m256 use[W], sum[W], alpha[W];
  const __m256 ninf = _mm256_set1_ps(-INFINITY), one = _mm256_set1_ps(1.0f);
  int rescale = 0;
#pragma GCC unroll 8
  for (int w = 0; w < 2 * V; w++) {
    __m256 mx = _mm256_loadu_ps(b->tmx + 8 * w);
    use[w] = _mm256_andnot_ps(_mm256_cmp_ps(mx, ninf, _CMP_EQ_OQ), mx); /* nothing attendable yet: 0 */
    alpha[w] = exp256(_mm256_sub_ps(_mm256_loadu_ps(b->mx + 8 * w), use[w]));
    rescale |= _mm256_movemask_ps(_mm256_cmp_ps(alpha[w], one, _CMP_NEQ_UQ)) != 0;
    _mm256_storeu_ps(b->mx + 8 * w, mx);
    sum[w] = _mm256_setzero_ps();
  }
  for (int64_t n = 0; n < nk; n++)
#pragma GCC unroll 8
    for (int w = 0; w < 2 * V; w++) {
      float *s = b->s + n * (16 * V) + 8 * w;
      __m256 p = exp256(_mm256_sub_ps(_mm256_load_ps(s), use[w]));
      _mm256_store_ps(s, p);
      sum[w] = _mm256_add_ps(sum[w], p);
    }
#pragma GCC unroll 8
  for (int w = 0; w < 2 * V; w++)
    _mm256_storeu_ps(b->sum + 8 * w, _mm256_fmadd_ps(_mm256_loadu_ps(b->sum + 8 * w), alpha[w], sum[w]));
  if (rescale)
    for (int64_t c = 0; c < b->dv; c++)
#pragma GCC unroll 8
      for (int w = 0; w < 2 * V; w++) {
        float *a = b->acc + c * (16 * V) + 8 * w;
        _mm256_store_ps(a, _mm256_mul_ps(_mm256_load_ps(a), alpha[w]));
      }
}

/* O^T rows [c, c + R), queries [16 v, 16 v + 16) += V^T P^T over the tile's keys: R dv columns broadcast from
 * V where they lie. UNIT: V's dv stride is 1. */
AVX2 INLINE void pv_block(const att_blk *b, int64_t n0, int64_t nk, int64_t c, int v, const int R, const int UNIT,
                          const int V) {
  __m256 a[RK2][2];
  int64_t vo[RK2];
  float *acc = b->acc + c * (16 * V) + 16 * v;
#pragma GCC unroll 6
  for (int r = 0; r < R; r++) {
    vo[r] = UNIT ? r : r * b->vsd;
    a[r][0] = _mm256_load_ps(acc + r * (16 * V));
    a[r][1] = _mm256_load_ps(acc + r * (16 * V) + 8);
  }
  const float *vp = b->V + n0 * b->vsk + c * b->vsd, *p = b->s + 16 * v;
  for (int64_t n = 0; n < nk; n++, vp += b->vsk, p += 16 * V) {
    _mm_prefetch((const char *)(vp + PFV * b->vsk), _MM_HINT_T0);
    __m256 x0 = _mm256_load_ps(p), x1 = _mm256_load_ps(p + 8);
#pragma GCC unroll 6
    for (int r = 0; r < R; r++) {
      __m256 w = _mm256_broadcast_ss(vp + vo[r]);
      a[r][0] = _mm256_fmadd_ps(w, x0, a[r][0]);
      a[r][1] = _mm256_fmadd_ps(w, x1, a[r][1]);
    }
  }
#pragma GCC unroll 6
  for (int r = 0; r < R; r++) {
    _mm256_store_ps(acc + r * (16 * V), a[r][0]);
    _mm256_store_ps(acc + r * (16 * V) + 8, a[r][1]);
  }
}

AVX2 INLINE void pv_256(const att_blk *b, int64_t n0, int64_t nk, const int V) {
  for (int v = 0; v < V; v++) {
    int64_t c = 0;
    if (b->vsd == 1) {
      for (; c + RK2 <= b->dv; c += RK2) pv_block(b, n0, nk, c, v, RK2, 1, V);
    } else {
      for (; c + RK2 <= b->dv; c += RK2) pv_block(b, n0, nk, c, v, RK2, 0, V);
    }
    switch (b->dv - c) {
    case 5: pv_block(b, n0, nk, c, v, 5, 0, V); break;
    case 4: pv_block(b, n0, nk, c, v, 4, 0, V); break;
    case 3: pv_block(b, n0, nk, c, v, 3, 0, V); break;
    case 2: pv_block(b, n0, nk, c, v, 2, 0, V); break;
    case 1: pv_block(b, n0, nk, c, v, 1, 0, V); break;
    }
  }
}

/* one key tile for blocks of V vectors of queries */
ATT_TILE_ENTRY(AVX2, primc_att_tile_avx2, scores_256, softmax_256, pv_256);

#endif
