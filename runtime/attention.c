/* runtime/attention.c: y = softmax(Q K^T * scale + mask) V in one pass over key tiles (online softmax: a
 * running row max and sum, the accumulator rescaled when the max grows), so the Sq x Sk scores never exist
 * beyond one QT x KT tile. Threads take (batch, head, block of QT queries); each packs the block's Q (scaled),
 * then per tile of KT keys K^T and V into its stack, and runs the tile on AVX-512 where the CPU has it,
 * else in plain C. */
#include "runtime/primc_rt.h"

#include <immintrin.h>
#include <math.h>
#include <string.h>

#define QT 64 /* queries per task: each K and V tile packed serves this many rows */
#define KT 64 /* keys per tile: the scores tile stays in L1 */

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
  int64_t nqt;
  int avx512;
} att_job;

/* one tile's buffers: dp = D and dvp = Dv rounded up to 16 lanes */
typedef struct tile {
  int64_t d, dv, dvp;
  float *qb;  /* [QT][d], scaled */
  float *kt;  /* [d][KT] */
  float *vb;  /* [KT][dvp] */
  float *s;   /* [QT][KT] */
  float *acc; /* [QT][dvp] */
  float mx[QT], sum[QT];
} tile;

/* ---------------------------------------------------------------- plain C rows */

static void scores_c(tile *t) {
  for (int i = 0; i < QT; i++) {
    float *s = t->s + i * KT;
    for (int j = 0; j < KT; j++) s[j] = 0;
    for (int64_t d = 0; d < t->d; d++) {
      float a = t->qb[i * t->d + d];
      const float *k = t->kt + d * KT;
      for (int j = 0; j < KT; j++) s[j] += a * k[j];
    }
  }
}

/* s = exp(s - mx) for row i with the new max, returns its sum */
static float exp_row_c(float *s, float mx) {
  float sum = 0;
  for (int j = 0; j < KT; j++) sum += s[j] = expf(s[j] - mx);
  return sum;
}

static float row_max_c(const float *s, float mx) {
  for (int n = 0; n < KT; n++) mx = s[n] > mx ? s[n] : mx;
  return mx;
}

static void pv_c(tile *t, int rows) {
  for (int i = 0; i < rows; i++) {
    float *acc = t->acc + i * t->dvp;
    const float *p = t->s + i * KT;
    for (int j = 0; j < KT; j++) {
      const float *v = t->vb + j * t->dvp;
      for (int64_t c = 0; c < t->dvp; c++) acc[c] += p[j] * v[c];
    }
  }
}

/* ---------------------------------------------------------------- AVX-512 rows */

#define AVX512 __attribute__((target("avx512f,fma")))

/* e^x, within 2 ulp on [-87, 88]; 0 below -87.3 (masked scores are -inf) */
AVX512 static inline __m512 exp512(__m512 x) {
  const __m512 lo = _mm512_set1_ps(-87.3f);
  __mmask16 live = _mm512_cmp_ps_mask(x, lo, _CMP_GE_OQ);
  x = _mm512_min_ps(_mm512_max_ps(x, lo), _mm512_set1_ps(88.0f));
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

AVX512 static float exp_row_512(float *s, float mx) {
  __m512 m = _mm512_set1_ps(mx), acc = _mm512_setzero_ps();
  for (int j = 0; j < KT; j += 16) {
    __m512 e = exp512(_mm512_sub_ps(_mm512_loadu_ps(s + j), m));
    _mm512_storeu_ps(s + j, e);
    acc = _mm512_add_ps(acc, e);
  }
  return _mm512_reduce_add_ps(acc);
}

AVX512 static float row_max_512(const float *s, float mx) {
  __m512 a = _mm512_max_ps(_mm512_loadu_ps(s), _mm512_loadu_ps(s + 16));
  __m512 b = _mm512_max_ps(_mm512_loadu_ps(s + 32), _mm512_loadu_ps(s + 48));
  float r = _mm512_reduce_max_ps(_mm512_max_ps(a, b));
  return r > mx ? r : mx;
}
_Static_assert(KT == 64, "row_max_512 reads 4 vectors");

/* 4 query rows x 32 keys a block: 8 accumulators, per d two K loads and four broadcasts */
AVX512 static void scores_512(tile *t) {
  for (int i = 0; i < QT; i += 4) {
    const float *q0 = t->qb + i * t->d, *q1 = q0 + t->d, *q2 = q1 + t->d, *q3 = q2 + t->d;
    for (int j = 0; j < KT; j += 32) {
      __m512 c00 = _mm512_setzero_ps(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00, c30 = c00, c31 = c00;
      const float *k = t->kt + j;
      for (int64_t d = 0; d < t->d; d++, k += KT) {
        __m512 k0 = _mm512_loadu_ps(k), k1 = _mm512_loadu_ps(k + 16), a;
        a = _mm512_set1_ps(q0[d]), c00 = _mm512_fmadd_ps(a, k0, c00), c01 = _mm512_fmadd_ps(a, k1, c01);
        a = _mm512_set1_ps(q1[d]), c10 = _mm512_fmadd_ps(a, k0, c10), c11 = _mm512_fmadd_ps(a, k1, c11);
        a = _mm512_set1_ps(q2[d]), c20 = _mm512_fmadd_ps(a, k0, c20), c21 = _mm512_fmadd_ps(a, k1, c21);
        a = _mm512_set1_ps(q3[d]), c30 = _mm512_fmadd_ps(a, k0, c30), c31 = _mm512_fmadd_ps(a, k1, c31);
      }
      float *s = t->s + i * KT + j;
      _mm512_storeu_ps(s, c00), _mm512_storeu_ps(s + 16, c01);
      _mm512_storeu_ps(s + KT, c10), _mm512_storeu_ps(s + KT + 16, c11);
      _mm512_storeu_ps(s + 2 * KT, c20), _mm512_storeu_ps(s + 2 * KT + 16, c21);
      _mm512_storeu_ps(s + 3 * KT, c30), _mm512_storeu_ps(s + 3 * KT + 16, c31);
    }
  }
}

/* acc[i] += P[i] V over the tile: 4 rows x 32 columns a block (16 for the last odd block of columns) */
AVX512 static void pv_512(tile *t, int rows) {
  int64_t dvp = t->dvp;
  for (int i = 0; i < rows; i += 4) {
    const float *p0 = t->s + i * KT, *p1 = p0 + KT, *p2 = p1 + KT, *p3 = p2 + KT;
    for (int64_t c = 0; c < dvp; c += 32) {
      int two = c + 32 <= dvp;
      float *a = t->acc + i * dvp + c;
      __m512 c00 = _mm512_loadu_ps(a), c10 = _mm512_loadu_ps(a + dvp), c20 = _mm512_loadu_ps(a + 2 * dvp),
             c30 = _mm512_loadu_ps(a + 3 * dvp);
      __m512 c01 = two ? _mm512_loadu_ps(a + 16) : c00, c11 = two ? _mm512_loadu_ps(a + dvp + 16) : c00;
      __m512 c21 = two ? _mm512_loadu_ps(a + 2 * dvp + 16) : c00, c31 = two ? _mm512_loadu_ps(a + 3 * dvp + 16) : c00;
      const float *v = t->vb + c;
      for (int j = 0; j < KT; j++, v += dvp) {
        __m512 v0 = _mm512_loadu_ps(v), v1 = two ? _mm512_loadu_ps(v + 16) : v0, x;
        x = _mm512_set1_ps(p0[j]), c00 = _mm512_fmadd_ps(x, v0, c00), c01 = _mm512_fmadd_ps(x, v1, c01);
        x = _mm512_set1_ps(p1[j]), c10 = _mm512_fmadd_ps(x, v0, c10), c11 = _mm512_fmadd_ps(x, v1, c11);
        x = _mm512_set1_ps(p2[j]), c20 = _mm512_fmadd_ps(x, v0, c20), c21 = _mm512_fmadd_ps(x, v1, c21);
        x = _mm512_set1_ps(p3[j]), c30 = _mm512_fmadd_ps(x, v0, c30), c31 = _mm512_fmadd_ps(x, v1, c31);
      }
      _mm512_storeu_ps(a, c00), _mm512_storeu_ps(a + dvp, c10);
      _mm512_storeu_ps(a + 2 * dvp, c20), _mm512_storeu_ps(a + 3 * dvp, c30);
      if (two) {
        _mm512_storeu_ps(a + 16, c01), _mm512_storeu_ps(a + dvp + 16, c11);
        _mm512_storeu_ps(a + 2 * dvp + 16, c21), _mm512_storeu_ps(a + 3 * dvp + 16, c31);
      }
    }
  }
}

/* ---------------------------------------------------------------- one task: QT queries of one head */

static void run_block(const att_job *j, tile *t, int64_t b0, int64_t b1, int64_t m0) {
  const int64_t *q = j->q;
  int64_t Sq = q[A_SQ], Sk = q[A_SK], D = t->d, Dv = t->dv, dvp = t->dvp;
  int rows = (int)(Sq - m0 < QT ? Sq - m0 : QT), rows4 = (rows + 3) & ~3, causal = (int)(q[A_FLAGS] & 2);
  double sc; /* the scale word holds a double's bits */
  memcpy(&sc, &q[A_SCALE], sizeof sc);
  float scale = (float)sc;
  const float *Qp = j->Q + q[A_Q] + b0 * q[A_Q + 1] + b1 * q[A_Q + 2];
  const float *Kp = j->K + q[A_K] + b0 * q[A_K + 1] + b1 * q[A_K + 2];
  const float *Vp = j->V + q[A_V] + b0 * q[A_V + 1] + b1 * q[A_V + 2];
  const float *Mp = j->M ? j->M + q[A_M] + b0 * q[A_M + 1] + b1 * q[A_M + 2] : NULL;
  float *Op = j->O + q[A_O] + b0 * q[A_O + 1] + b1 * q[A_O + 2];
  memset(t->qb, 0, sizeof(float) * (size_t)(QT * D));
  for (int i = 0; i < rows; i++)
    for (int64_t d = 0; d < D; d++) t->qb[i * D + d] = Qp[(m0 + i) * q[A_Q + 3] + d * q[A_Q + 4]] * scale;
  memset(t->acc, 0, sizeof(float) * (size_t)(QT * dvp));
  for (int i = 0; i < QT; i++) t->mx[i] = -INFINITY, t->sum[i] = 0;
  /* with a causal mask, keys past the block's last query are never read */
  int64_t kend = causal && m0 + rows < Sk ? m0 + rows : Sk;
  for (int64_t n0 = 0; n0 < kend; n0 += KT) {
    int64_t nk = kend - n0 < KT ? kend - n0 : KT;
    /* K^T: along each key's row (contiguous in the usual layouts), scattered into the L1-resident tile */
    int64_t ksd = q[A_K + 4], vsd = q[A_V + 4];
    for (int64_t n = 0; n < KT; n++) {
      const float *k = Kp + (n0 + n) * q[A_K + 3];
      if (n >= nk)
        for (int64_t d = 0; d < D; d++) t->kt[d * KT + n] = 0;
      else if (ksd == 1)
        for (int64_t d = 0; d < D; d++) t->kt[d * KT + n] = k[d];
      else
        for (int64_t d = 0; d < D; d++) t->kt[d * KT + n] = k[d * ksd];
    }
    for (int64_t n = 0; n < KT; n++) {
      float *v = t->vb + n * dvp;
      const float *src = Vp + (n0 + n) * q[A_V + 3];
      int64_t c = 0;
      if (n < nk && vsd == 1) memcpy(v, src, sizeof(float) * (size_t)(c = Dv));
      for (; c < dvp; c++) v[c] = n < nk && c < Dv ? src[c * vsd] : 0;
    }
    if (j->avx512) scores_512(t);
    else scores_c(t);
    for (int i = 0; i < rows; i++) {
      float *s = t->s + i * KT;
      int64_t m = m0 + i;
      if (Mp)
        for (int64_t n = 0; n < nk; n++) s[n] += Mp[m * q[A_M + 3] + (n0 + n) * q[A_M + 4]];
      for (int64_t n = causal ? (m + 1 - n0 > 0 ? m + 1 - n0 : 0) : nk; n < KT; n++) s[n] = -INFINITY;
      for (int64_t n = nk; n < KT; n++) s[n] = -INFINITY;
      float mx = j->avx512 ? row_max_512(s, t->mx[i]) : row_max_c(s, t->mx[i]);
      if (mx == -INFINITY) { /* nothing attendable yet in this row: it adds nothing */
        memset(s, 0, sizeof(float) * KT);
        continue;
      }
      float alpha = t->mx[i] == -INFINITY ? 0 : expf(t->mx[i] - mx);
      t->mx[i] = mx;
      float sum = j->avx512 ? exp_row_512(s, mx) : exp_row_c(s, mx);
      t->sum[i] = t->sum[i] * alpha + sum;
      if (alpha != 1)
        for (int64_t c = 0; c < dvp; c++) t->acc[i * dvp + c] *= alpha;
    }
    for (int i = rows; i < rows4; i++) memset(t->s + i * KT, 0, sizeof(float) * KT);
    if (j->avx512) pv_512(t, rows4);
    else pv_c(t, rows);
  }
  for (int i = 0; i < rows; i++) {
    float inv = 1.0f / t->sum[i]; /* a row with no attendable key: 0 / 0, as the softmax's prims give */
    for (int64_t c = 0; c < Dv; c++) Op[(m0 + i) * q[A_O + 3] + c * q[A_O + 4]] = t->acc[i * dvp + c] * inv;
  }
}

static void att_tasks(void *ctx, int64_t begin, int64_t end) {
  const att_job *j = ctx;
  const int64_t *q = j->q;
  int64_t D = q[A_D], Dv = q[A_DV], dvp = (Dv + 15) / 16 * 16;
  float qb[QT * D], kt[D * KT], vb[KT * dvp], s[QT * KT], acc[QT * dvp];
  tile t = {D, Dv, dvp, qb, kt, vb, s, acc, {0}, {0}};
  for (int64_t task = begin; task < end; task++) {
    int64_t head = task / j->nqt, m0 = task % j->nqt * QT;
    run_block(j, &t, head / q[A_B1], head % q[A_B1], m0);
  }
}

/* bufs: out, q, k, v[, mask] */
int primc_k_attention(const int64_t *q, void *const *bufs) {
  if (q[A_DT] != PRIMC_F32 || q[A_D] < 1 || q[A_D] > PRIMC_ATTENTION_MAX_DIM || q[A_DV] < 1 ||
      q[A_DV] > PRIMC_ATTENTION_MAX_DIM)
    return PRIMC_ERR_RUNTIME;
  int64_t heads = q[A_B0] * q[A_B1];
  if (heads == 0 || q[A_SQ] == 0) return PRIMC_OK;
  att_job j = {q, bufs[1], bufs[2], bufs[3], (q[A_FLAGS] & 1) ? bufs[4] : NULL, bufs[0], (q[A_SQ] + QT - 1) / QT,
               primc_attention_avx512()};
  if (q[A_SK] == 0) { /* softmax over no keys: 0 / 0 */
    for (int64_t h = 0; h < heads; h++)
      for (int64_t m = 0; m < q[A_SQ]; m++)
        for (int64_t c = 0; c < q[A_DV]; c++)
          j.O[q[A_O] + h / q[A_B1] * q[A_O + 1] + h % q[A_B1] * q[A_O + 2] + m * q[A_O + 3] + c * q[A_O + 4]] = NAN;
    return PRIMC_OK;
  }
  primc_parallel_for(heads * j.nqt, att_tasks, &j);
  return PRIMC_OK;
}

static int force_generic = -1;

void primc_attention_force_generic(int on) { force_generic = on; }

int primc_attention_avx512(void) {
  if (force_generic > 0) return 0;
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("fma");
}
