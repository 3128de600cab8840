/* runtime/attention_avx512.c: the fused attention call's AVX-512 row: 16 queries a zmm, 6 keys x 4 zmm of
 * queries (or 8 x 3, 8 x 2, 8 x 1) accumulated in registers as in the GEMM's rows (runtime/gemm/avx512.c). */
#include "runtime/attention.h"
#include "runtime/arch.h"

#if PRIMC_X86
#include "runtime/avx512.h"

#include <immintrin.h>
#include <math.h>
#include <string.h>

#define RK 8 /* broadcast rows a register block at most: keys in K Q^T, dv columns in V^T P^T */
/* the rows a block of V vectors takes: 6 x 4 or 8 x 3 zmm accumulators, 16 or 8 for fewer queries */
#define RK_OF(V) ((V) == 4 ? 6 : 8)

#define AVX512 __attribute__((target("avx512f,fma")))
#define INLINE static inline __attribute__((always_inline))

/* e^x for x <= 0 (scores less their max), within 2 ulp down to -87; 0 below -87.3 (masked scores are -inf) */
AVX512 INLINE __m512 exp512(__m512 x) {
  const __m512 lo = _mm512_set1_ps(-87.3f);
  __mmask16 live = _mm512_cmp_ps_mask(x, lo, _CMP_GE_OQ);
  x = _mm512_max_ps(x, lo);
  __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504f)), _MM_FROUND_TO_NEAREST_INT);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693145752f), x);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(1.42860677e-6f), r);
  __m512 p = _mm512_set1_ps(1.98756912e-4f);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.39819994e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.33345205e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.16657962e-2f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.66666672e-1f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.5f));
  p = _mm512_fmadd_ps(p, _mm512_mul_ps(r, r), _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
  return _mm512_maskz_mov_ps(live, _mm512_scalef_ps(p, n));
}

/* the scores of key n for lanes [16 v, 16 v + 16) with the mask added (gathered when it varies along the
 * queries, only the live lanes read) and the causal cut (-inf for the queries before the key) */
AVX512 INLINE __m512 masked512(const att_blk *b, int64_t n, int v, __m512 x) {
  const __m512i lane = _mm512_add_epi32(_mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0),
                                        _mm512_set1_epi32(16 * v));
  if (b->M) {
    const float *m = b->M + b->m0 * b->msq + n * b->msk;
    if (b->msq) {
      __mmask16 live = _mm512_cmplt_epi32_mask(lane, _mm512_set1_epi32((int32_t)b->rows));
      __m512i at = _mm512_mullo_epi32(lane, _mm512_set1_epi32((int32_t)b->msq));
      x = _mm512_add_ps(x, _mm512_mask_i32gather_ps(_mm512_setzero_ps(), live, at, m, 4));
    } else {
      x = _mm512_add_ps(x, _mm512_set1_ps(*m));
    }
  }
  if (b->causal)
    x = _mm512_mask_mov_ps(x, _mm512_cmplt_epi32_mask(lane, _mm512_set1_epi32((int32_t)(n - b->m0))),
                           _mm512_set1_ps(-INFINITY));
  return x;
}

/* S^T rows [n, n + R): R keys broadcast from K where they lie, against Q^T's VQ vectors, per d; stored with
 * the mask applied, into the tile's running max */
AVX512 INLINE void qk_block(att_blk *b, int64_t n, const int R, const int V) {
  __m512 c[RK][VQ];
  const float *kp[RK];
#pragma GCC unroll 8
  for (int r = 0; r < R; r++) {
    kp[r] = b->K + (n + r) * b->ksk;
#pragma GCC unroll 4
    for (int v = 0; v < V; v++) c[r][v] = _mm512_setzero_ps();
  }
  const float *qt = b->qt;
  for (int64_t d = 0, off = 0; d < b->d; d++, off += b->ksd, qt += (16 * V)) {
    __m512 x[VQ];
#pragma GCC unroll 4
    for (int v = 0; v < V; v++) x[v] = _mm512_load_ps(qt + 16 * v);
#pragma GCC unroll 8
    for (int r = 0; r < R; r++) {
      __m512 a = _mm512_set1_ps(kp[r][off]);
#pragma GCC unroll 4
      for (int v = 0; v < V; v++) c[r][v] = _mm512_fmadd_ps(a, x[v], c[r][v]);
    }
  }
  float *s = b->s + (n % KT) * (16 * V);
  __m512 mx[VQ];
#pragma GCC unroll 4
  for (int v = 0; v < V; v++) mx[v] = _mm512_loadu_ps(b->tmx + 16 * v);
#pragma GCC unroll 8
  for (int r = 0; r < R; r++)
#pragma GCC unroll 4
    for (int v = 0; v < V; v++) {
      __m512 x = b->M || b->causal ? masked512(b, n + r, v, c[r][v]) : c[r][v];
      _mm512_store_ps(s + r * (16 * V) + 16 * v, x);
      mx[v] = _mm512_max_ps(mx[v], x);
    }
#pragma GCC unroll 4
  for (int v = 0; v < V; v++) _mm512_storeu_ps(b->tmx + 16 * v, mx[v]);
}

AVX512 INLINE void scores_512(att_blk *b, int64_t n0, int64_t nk, const int V) {
  memcpy(b->tmx, b->mx, sizeof b->tmx);
  int64_t n = n0, end = n0 + nk;
  for (; n + RK_OF(V) <= end; n += RK_OF(V)) qk_block(b, n, RK_OF(V), V);
  switch (end - n) { /* the remainder, fewer rows */
  case 7: qk_block(b, n, 7, V); break;
  case 6: qk_block(b, n, 6, V); break;
  case 5: qk_block(b, n, 5, V); break;
  case 4: qk_block(b, n, 4, V); break;
  case 3: qk_block(b, n, 3, V); break;
  case 2: qk_block(b, n, 2, V); break;
  case 1: qk_block(b, n, 1, V); break;
  }
}
_Static_assert(RK == 8, "the remainders' switches");

/* P^T = exp(S^T - the new max), the sums; the accumulator rescaled where the max grew */
AVX512 INLINE void softmax_512(att_blk *b, int64_t nk, const int V) {
  __m512 mx[VQ], use[VQ], sum[VQ], alpha[VQ];
  const __m512 ninf = _mm512_set1_ps(-INFINITY);
#pragma GCC unroll 4
  for (int v = 0; v < V; v++) mx[v] = _mm512_loadu_ps(b->tmx + 16 * v);
  int rescale = 0;
#pragma GCC unroll 4
  for (int v = 0; v < V; v++) {
    use[v] = _mm512_mask_mov_ps(mx[v], _mm512_cmpeq_ps_mask(mx[v], ninf), _mm512_setzero_ps());
    alpha[v] = exp512(_mm512_sub_ps(_mm512_loadu_ps(b->mx + 16 * v), use[v]));
    rescale |= _mm512_cmpneq_ps_mask(alpha[v], _mm512_set1_ps(1.0f)) != 0;
    _mm512_storeu_ps(b->mx + 16 * v, mx[v]);
    sum[v] = _mm512_setzero_ps();
  }
  for (int64_t n = 0; n < nk; n++)
#pragma GCC unroll 4
    for (int v = 0; v < V; v++) {
      float *s = b->s + n * (16 * V) + 16 * v;
      __m512 p = exp512(_mm512_sub_ps(_mm512_load_ps(s), use[v]));
      _mm512_store_ps(s, p);
      sum[v] = _mm512_add_ps(sum[v], p);
    }
#pragma GCC unroll 4
  for (int v = 0; v < V; v++)
    _mm512_storeu_ps(b->sum + 16 * v, _mm512_fmadd_ps(_mm512_loadu_ps(b->sum + 16 * v), alpha[v], sum[v]));
  if (rescale)
    for (int64_t c = 0; c < b->dv; c++)
#pragma GCC unroll 4
      for (int v = 0; v < V; v++)
        _mm512_store_ps(b->acc + c * (16 * V) + 16 * v, _mm512_mul_ps(_mm512_load_ps(b->acc + c * (16 * V) + 16 * v), alpha[v]));
}

/* O^T rows [c, c + R) += V^T P^T over the tile's keys: R dv columns broadcast from V where they lie. UNIT:
 * V's dv stride is 1, so the R broadcasts are fixed offsets from one pointer. */
AVX512 INLINE void pv_block(const att_blk *b, int64_t n0, int64_t nk, int64_t c, const int R, const int UNIT, const int V) {
  __m512 a[RK][VQ];
  int64_t vo[RK];
  float *acc = b->acc + c * (16 * V);
#pragma GCC unroll 8
  for (int r = 0; r < R; r++) {
    vo[r] = UNIT ? r : r * b->vsd;
#pragma GCC unroll 4
    for (int v = 0; v < V; v++) a[r][v] = _mm512_load_ps(acc + r * (16 * V) + 16 * v);
  }
  const float *vp = b->V + n0 * b->vsk + c * b->vsd, *p = b->s;
  for (int64_t n = 0; n < nk; n++, vp += b->vsk, p += (16 * V)) {
    __m512 x[VQ];
#ifndef NOPF
    _mm_prefetch((const char *)(vp + PFV * b->vsk), _MM_HINT_T0);
#endif
#pragma GCC unroll 4
    for (int v = 0; v < V; v++) x[v] = _mm512_load_ps(p + 16 * v);
#pragma GCC unroll 8
    for (int r = 0; r < R; r++) {
      __m512 w = _mm512_set1_ps(vp[vo[r]]);
#pragma GCC unroll 4
      for (int v = 0; v < V; v++) a[r][v] = _mm512_fmadd_ps(w, x[v], a[r][v]);
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < R; r++)
#pragma GCC unroll 4
    for (int v = 0; v < V; v++) _mm512_store_ps(acc + r * (16 * V) + 16 * v, a[r][v]);
}

AVX512 INLINE void pv_512(const att_blk *b, int64_t n0, int64_t nk, const int V) {
  int64_t c = 0;
  if (b->vsd == 1) {
    for (; c + RK_OF(V) <= b->dv; c += RK_OF(V)) pv_block(b, n0, nk, c, RK_OF(V), 1, V);
  } else {
    for (; c + RK_OF(V) <= b->dv; c += RK_OF(V)) pv_block(b, n0, nk, c, RK_OF(V), 0, V);
  }
  switch (b->dv - c) {
  case 7: pv_block(b, n0, nk, c, 7, 0, V); break;
  case 6: pv_block(b, n0, nk, c, 6, 0, V); break;
  case 5: pv_block(b, n0, nk, c, 5, 0, V); break;
  case 4: pv_block(b, n0, nk, c, 4, 0, V); break;
  case 3: pv_block(b, n0, nk, c, 3, 0, V); break;
  case 2: pv_block(b, n0, nk, c, 2, 0, V); break;
  case 1: pv_block(b, n0, nk, c, 1, 0, V); break;
  }
}

/* one key tile for blocks of V vectors of queries */
ATT_TILE_ENTRY(AVX512, primc_att_tile_avx512, scores_512, softmax_512, pv_512);

/* Q^T = Q's rows [m0, m0 + rows) scaled, 16 x 16 blocks through registers (Q's d stride 1) */
AVX512 void primc_att_pack_q_avx512(att_blk *b, const float *Q, int64_t ld, float scale) {
  int64_t lanes = 16 * b->vq;
  for (int v = 0; v < b->vq; v++)
    for (int64_t d = 0; d < b->d; d += 16)
      primc_tr16_part(Q + 16 * v * ld + d, ld, (int)(b->rows - 16 * v < 16 ? b->rows - 16 * v : 16),
                      (int)(b->d - d < 16 ? b->d - d : 16), b->qt + d * lanes + 16 * v, lanes);
  __m512 sc = _mm512_set1_ps(scale);
  for (int64_t i = 0; i < b->d * lanes; i += 16) _mm512_store_ps(b->qt + i, _mm512_mul_ps(_mm512_load_ps(b->qt + i), sc));
}

/* y's rows [m0, m0 + rows) = O^T / sum, transposed back the same way (y's dv stride 1) */
AVX512 void primc_att_store_o_avx512(att_blk *b, float *y, int64_t ld) {
  int64_t lanes = 16 * b->vq;
  for (int v = 0; v < b->vq; v++) {
    __m512 inv = _mm512_div_ps(_mm512_set1_ps(1.0f), _mm512_loadu_ps(b->sum + 16 * v));
    for (int64_t c = 0; c < b->dv; c++)
      _mm512_store_ps(b->acc + c * lanes + 16 * v, _mm512_mul_ps(_mm512_load_ps(b->acc + c * lanes + 16 * v), inv));
  }
  for (int v = 0; v < b->vq; v++)
    for (int64_t c = 0; c < b->dv; c += 16)
      primc_tr16_part(b->acc + c * lanes + 16 * v, lanes, (int)(b->dv - c < 16 ? b->dv - c : 16),
                      (int)(b->rows - 16 * v < 16 ? b->rows - 16 * v : 16), y + 16 * v * ld + c, ld);
}

#endif
