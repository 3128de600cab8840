/* runtime/attention.c: y = softmax(Q K^T * scale + mask) V in one pass over key tiles (online softmax: a
 * running max and sum per query, the accumulator rescaled when the max grows), so the Sq x Sk scores never
 * exist beyond one KT x QB tile. Threads take (batch, head, block of up to QB queries). Everything is computed
 * transposed, queries along the vector lanes: the scores tile S^T[key][query] = K Q^T with Q^T packed once
 * per block (scaled) and K's elements broadcast where they lie, then the softmax down the tile's columns
 * (a lane's max, exp and sum are plain vector ops, no reduction across lanes), then the accumulator
 * O^T[dv][query] += V^T P^T with V's elements broadcast where they lie: K and V are never packed or
 * copied. Register blocks as the GEMM's rows (runtime/gemm/avx512.c): up to RK broadcast rows x the block's
 * vectors of queries (1 to VQ) accumulated in zmm. AVX-512 where the CPU has it, else the same steps in
 * plain C. primc_attention_pays, at the end, is where the fuser learns whether the call pays. */
#include "runtime/primc_rt.h"
#if PRIMC_X86
#include "runtime/avx512.h"

#include <immintrin.h>
#endif
#include <math.h>
#include <stdint.h>
#include <string.h>

#define VQ 4         /* vectors of 16 queries a task at most (b->vq: fewer for short query blocks) */
#define QB (16 * VQ) /* the lanes of every tile, of which a task uses 16 * b->vq */
#ifndef KT
#define KT 128 /* keys a tile: the scores tile, KT x QB floats, stays in L1 */
#endif
#ifndef PFV
#define PFV 16
#endif
#define RK 8 /* broadcast rows a register block at most: keys in K Q^T, dv columns in V^T P^T */
/* the rows a block of V vectors takes: 6 x 4 or 8 x 3 zmm accumulators, 16 or 8 for fewer queries */
#define RK_OF(V) ((V) == 4 ? 6 : 8)

/* params (codegen/calls.def): the shape, then per operand an element offset and strides */
enum {
  A_DT, A_B0, A_B1, A_SQ, A_SK, A_D, A_DV,
  A_Q, /* off, b0, b1, row (query), col (d) */
  A_K = A_Q + 5, /* off, b0, b1, key, d */
  A_V = A_K + 5, /* off, b0, b1, key, dv */
  A_M = A_V + 5, /* off, b0, b1, query, key */
  A_O = A_M + 5, /* off, b0, b1, query, dv */
  A_FLAGS = A_O + 5, A_SCALE, A_WORDS
};
_Static_assert(A_WORDS == PRIMC_ATTENTION_PARAMS, "attention params");

typedef struct att_job {
  const int64_t *q;
  const float *Q, *K, *V, *M;
  float *O;
  int64_t nqb, qbs; /* query blocks a head, queries a block (the last may have fewer) */
  int avx512;
} att_job;

/* one task's view: the head's operands, its QB queries from m0 (rows of them real) and its buffers */
typedef struct blk {
  int64_t d, dv, m0, rows;
  int vq; /* vectors of queries: 16 * vq >= rows */
  const float *K, *V, *M; /* at the head */
  int64_t ksk, ksd, vsk, vsd, msq, msk;
  int causal;
  float *qt;  /* [d][16 vq]: Q^T, scaled, lanes past rows 0 */
  float *s;   /* [KT][16 vq]: S^T, then P^T */
  float *acc; /* [dv][16 vq]: O^T, unnormalized */
  float mx[QB], sum[QB];
  float tmx[QB]; /* AVX-512: the running max with the current tile's scores, kept as they are stored */
} blk;

/* ---------------------------------------------------------------- plain C rows */

static void scores_c(const blk *b, int64_t n0, int64_t nk) {
  int64_t ld = 16 * b->vq;
  for (int64_t n = 0; n < nk; n++) {
    float *s = b->s + n * ld;
    const float *k = b->K + (n0 + n) * b->ksk;
    for (int l = 0; l < b->rows; l++) s[l] = 0;
    for (int64_t d = 0; d < b->d; d++) {
      float a = k[d * b->ksd];
      for (int l = 0; l < b->rows; l++) s[l] += a * b->qt[d * ld + l];
    }
  }
}

/* mask, causal cut, the new running max, P^T = exp(S^T - max), the sums, the accumulator rescaled */
static void softmax_c(blk *b, int64_t n0, int64_t nk) {
  int64_t ld = 16 * b->vq;
  float mx[QB];
  memcpy(mx, b->mx, sizeof mx);
  for (int64_t n = 0; n < nk; n++) {
    float *s = b->s + n * ld;
    for (int l = 0; l < b->rows; l++) {
      if (b->M) s[l] += b->M[(b->m0 + l) * b->msq + (n0 + n) * b->msk];
      if (b->causal && n0 + n > b->m0 + l) s[l] = -INFINITY;
      mx[l] = s[l] > mx[l] ? s[l] : mx[l];
    }
  }
  for (int l = 0; l < b->rows; l++) {
    float use = mx[l] == -INFINITY ? 0 : mx[l]; /* nothing attendable yet: every p and alpha is 0 */
    float alpha = expf(b->mx[l] - use);
    b->mx[l] = mx[l];
    float sum = 0;
    for (int64_t n = 0; n < nk; n++) sum += b->s[n * ld + l] = expf(b->s[n * ld + l] - use);
    b->sum[l] = b->sum[l] * alpha + sum;
    if (alpha != 1)
      for (int64_t c = 0; c < b->dv; c++) b->acc[c * ld + l] *= alpha;
  }
}

static void pv_c(const blk *b, int64_t n0, int64_t nk) {
  int64_t ld = 16 * b->vq;
  for (int64_t n = 0; n < nk; n++) {
    const float *p = b->s + n * ld, *v = b->V + (n0 + n) * b->vsk;
    for (int64_t c = 0; c < b->dv; c++) {
      float a = v[c * b->vsd];
      for (int l = 0; l < b->rows; l++) b->acc[c * ld + l] += a * p[l];
    }
  }
}

#if PRIMC_X86
/* ---------------------------------------------------------------- AVX-512 rows */

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
AVX512 INLINE __m512 masked512(const blk *b, int64_t n, int v, __m512 x) {
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
AVX512 INLINE void qk_block(blk *b, int64_t n, const int R, const int V) {
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

AVX512 INLINE void scores_512(blk *b, int64_t n0, int64_t nk, const int V) {
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
AVX512 INLINE void softmax_512(blk *b, int64_t nk, const int V) {
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
AVX512 INLINE void pv_block(const blk *b, int64_t n0, int64_t nk, int64_t c, const int R, const int UNIT, const int V) {
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

AVX512 INLINE void pv_512(const blk *b, int64_t n0, int64_t nk, const int V) {
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

/* one key tile on AVX-512 for blocks of V vectors of queries */
#define TILE512(V)                                                      \
  static AVX512 void tile512_##V(blk *b, int64_t n0, int64_t nk) {     \
    scores_512(b, n0, nk, V);                                           \
    softmax_512(b, nk, V);                                              \
    pv_512(b, n0, nk, V);                                               \
  }
TILE512(1) TILE512(2) TILE512(3) TILE512(4)
_Static_assert(VQ == 4, "a tile512_V for each V up to VQ");

/* Q^T = Q's rows [m0, m0 + rows) scaled, 16 x 16 blocks through registers (Q's d stride 1) */
AVX512 static void pack_q_512(blk *b, const float *Q, int64_t ld, float scale) {
  int64_t lanes = 16 * b->vq;
  for (int v = 0; v < b->vq; v++)
    for (int64_t d = 0; d < b->d; d += 16)
      primc_tr16_part(Q + 16 * v * ld + d, ld, (int)(b->rows - 16 * v < 16 ? b->rows - 16 * v : 16),
                      (int)(b->d - d < 16 ? b->d - d : 16), b->qt + d * lanes + 16 * v, lanes);
  __m512 sc = _mm512_set1_ps(scale);
  for (int64_t i = 0; i < b->d * lanes; i += 16) _mm512_store_ps(b->qt + i, _mm512_mul_ps(_mm512_load_ps(b->qt + i), sc));
}

/* y's rows [m0, m0 + rows) = O^T / sum, transposed back the same way (y's dv stride 1) */
AVX512 static void store_o_512(blk *b, float *y, int64_t ld) {
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

/* ---------------------------------------------------------------- one task: QB queries of one head */

static void run_block(const att_job *j, blk *b, int64_t b0, int64_t b1, int64_t m0) {
  const int64_t *q = j->q;
  int64_t Sq = q[A_SQ], Sk = q[A_SK], D = b->d, Dv = b->dv;
  double sc; /* the scale word holds a double's bits */
  memcpy(&sc, &q[A_SCALE], sizeof sc);
  float scale = (float)sc;
  const float *Qp = j->Q + q[A_Q] + b0 * q[A_Q + 1] + b1 * q[A_Q + 2];
  float *Op = j->O + q[A_O] + b0 * q[A_O + 1] + b1 * q[A_O + 2];
  b->K = j->K + q[A_K] + b0 * q[A_K + 1] + b1 * q[A_K + 2];
  b->V = j->V + q[A_V] + b0 * q[A_V + 1] + b1 * q[A_V + 2];
  b->M = j->M ? j->M + q[A_M] + b0 * q[A_M + 1] + b1 * q[A_M + 2] : NULL;
  b->m0 = m0;
  b->rows = Sq - m0 < j->qbs ? Sq - m0 : j->qbs;
  b->vq = (int)((b->rows + 15) / 16);
  int64_t lanes = 16 * b->vq; /* the tiles' row length */
  memset(b->qt, 0, sizeof(float) * (size_t)(D * lanes));
#if PRIMC_X86
  if (j->avx512 && q[A_Q + 4] == 1)
    pack_q_512(b, Qp + m0 * q[A_Q + 3], q[A_Q + 3], scale);
  else
#endif
    for (int64_t l = 0; l < b->rows; l++) {
      const float *x = Qp + (m0 + l) * q[A_Q + 3];
      for (int64_t d = 0; d < D; d++) b->qt[d * lanes + l] = x[d * q[A_Q + 4]] * scale;
    }
  memset(b->acc, 0, sizeof(float) * (size_t)(Dv * lanes));
  for (int l = 0; l < QB; l++) b->mx[l] = -INFINITY, b->sum[l] = 0;
  /* with a causal mask, keys past the block's last query are never read */
  int64_t kend = b->causal && m0 + b->rows < Sk ? m0 + b->rows : Sk;
  for (int64_t n0 = 0; n0 < kend; n0 += KT) {
    int64_t nk = kend - n0 < KT ? kend - n0 : KT;
#if PRIMC_X86
    if (j->avx512) {
      static void (*const tile512[VQ])(blk *, int64_t, int64_t) = {tile512_1, tile512_2, tile512_3, tile512_4};
      tile512[b->vq - 1](b, n0, nk);
      continue;
    }
#endif
    scores_c(b, n0, nk);
    softmax_c(b, n0, nk);
    pv_c(b, n0, nk);
  }
  /* a row with no attendable key: 0 / 0, as the softmax's prims give */
#if PRIMC_X86
  if (j->avx512 && q[A_O + 4] == 1) {
    store_o_512(b, Op + m0 * q[A_O + 3], q[A_O + 3]);
    return;
  }
#endif
  for (int64_t l = 0; l < b->rows; l++) {
    float inv = 1.0f / b->sum[l];
    float *y = Op + (m0 + l) * q[A_O + 3];
    for (int64_t c = 0; c < Dv; c++) y[c * q[A_O + 4]] = b->acc[c * lanes + l] * inv;
  }
}

static float *align64(float *p) { return (float *)(((uintptr_t)p + 63) & ~(uintptr_t)63); }

static void att_tasks(void *ctx, int64_t begin, int64_t end) {
  const att_job *j = ctx;
  const int64_t *q = j->q;
  int64_t D = q[A_D], Dv = q[A_DV];
  float qt[D * QB + 16], s[KT * QB + 16], acc[Dv * QB + 16];
  blk b = {.d = D, .dv = Dv, .ksk = q[A_K + 3], .ksd = q[A_K + 4], .vsk = q[A_V + 3], .vsd = q[A_V + 4],
           .msq = q[A_M + 3], .msk = q[A_M + 4], .causal = (int)(q[A_FLAGS] & 2), .qt = align64(qt),
           .s = align64(s), .acc = align64(acc)};
  for (int64_t task = begin; task < end; task++) {
    int64_t head = task / j->nqb;
    run_block(j, &b, head / q[A_B1], head % q[A_B1], task % j->nqb * j->qbs);
  }
}

/* bufs: out, q, k, v[, mask] */
int primc_k_attention(const int64_t *q, void *const *bufs) {
  if (q[A_DT] != PRIMC_F32 || q[A_D] < 1 || q[A_D] > PRIMC_ATTENTION_MAX_DIM || q[A_DV] < 1 ||
      q[A_DV] > PRIMC_ATTENTION_MAX_DIM)
    return PRIMC_ERR_RUNTIME;
  int64_t heads = q[A_B0] * q[A_B1];
  if (heads == 0 || q[A_SQ] == 0) return PRIMC_OK;
  /* blocks of at most QB queries, as even as whole vectors make them: 70 queries as 48 + 22, not 64 + 6 */
  int64_t nqb = (q[A_SQ] + QB - 1) / QB, qbs = ((q[A_SQ] + nqb - 1) / nqb + 15) / 16 * 16;
  nqb = (q[A_SQ] + qbs - 1) / qbs;
  att_job j = {q, bufs[1], bufs[2], bufs[3], (q[A_FLAGS] & 1) ? bufs[4] : NULL, bufs[0], nqb, qbs,
               primc_attention_avx512()};
  /* the gathered mask's lane offsets are 32-bit */
  if (j.M && (q[A_M + 3] > INT32_MAX / QB || q[A_M + 3] < INT32_MIN / QB)) j.avx512 = 0;
  if (q[A_SK] == 0) { /* softmax over no keys: 0 / 0 */
    for (int64_t h = 0; h < heads; h++)
      for (int64_t m = 0; m < q[A_SQ]; m++)
        for (int64_t c = 0; c < q[A_DV]; c++)
          j.O[q[A_O] + h / q[A_B1] * q[A_O + 1] + h % q[A_B1] * q[A_O + 2] + m * q[A_O + 3] + c * q[A_O + 4]] = NAN;
    return PRIMC_OK;
  }
  primc_parallel_for(heads * j.nqb, att_tasks, &j);
  return PRIMC_OK;
}

/* ---------------------------------------------------------------- the planner */

/* Every threshold that picks the fused call over the stored-scores kernels (QK^T and PV on the GEMM, the
 * softmax as loop kernels) lives here, decided once per chain when it is compiled (passes/fuse.c), one
 * tuning row per CPU kind as runtime/conv/plan.c's. A task's queries fill whole vectors of 16, so below
 * min_queries the call computes lanes no query uses (up to 16x the GEMM's multiply-adds for one query)
 * and the GEMM's rows win; from there the call, which neither stores nor rereads the scores, wins.
 * Figures: bench/attention.md. */
typedef struct att_tuning {
  const char *cpu;
  int64_t min_queries;
} att_tuning;

/* indexed by primc_cpu_zmm_fmas(): zmm FMAs a core starts per cycle */
static const att_tuning tunings[3] = {
    {"no AVX-512: the plain C row, far slower than the GEMM's vector rows", INT64_MAX},
    {"AVX-512, one zmm FMA per cycle (not measured: as two)", 32},
    /* Emerald Rapids, 12 heads of 64, Sk 64 to 2048: the GEMMs win up to 24 queries (Sk 2048: 2.4 ms
     * against 3.2), the call from 32 (3.4 ms against 3.9) */
    {"AVX-512, two zmm FMAs per cycle", 32},
};

static int force_fuse = -1;

void primc_attention_force_fuse(int on) { force_fuse = on; }

int primc_attention_pays_for(int zmm_fmas, int64_t sq, int64_t sk) {
  (void)sk;
  if (force_fuse >= 0) return force_fuse;
  return sq >= tunings[zmm_fmas >= 0 && zmm_fmas <= 2 ? zmm_fmas : 0].min_queries;
}

int primc_attention_pays(int64_t sq, int64_t sk) { return primc_attention_pays_for(primc_cpu_zmm_fmas(), sq, sk); }

static int force_generic = -1;

void primc_attention_force_generic(int on) { force_generic = on; }

int primc_attention_avx512(void) {
  if (force_generic > 0) return 0;
#if PRIMC_X86
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("fma");
#else
  return 0;
#endif
}
