/* runtime/attention.c: y = softmax(Q K^T * scale + mask) V in one pass over key tiles (online softmax: a
 * running max and sum per query, the accumulator rescaled when the max grows), so the Sq x Sk scores never
 * exist beyond one KT x QB tile. Threads take (batch, head, block of up to QB queries). Everything is computed
 * transposed, queries along the vector lanes: the scores tile S^T[key][query] = K Q^T with Q^T packed once
 * per block (scaled) and K's elements broadcast where they lie, then the softmax down the tile's columns
 * (a lane's max, exp and sum are plain vector ops, no reduction across lanes), then the accumulator
 * O^T[dv][query] += V^T P^T with V's elements broadcast where they lie: K and V are never packed or
 * copied. The vector code is a row per instruction set (runtime/attention_rows.def: attention_avx512.c,
 * attention_avx2.c, register blocks as the GEMM's rows), the plain C row here runs the same steps on any CPU.
 * primc_attention_pays, at the end, is where the fuser learns whether the call pays. */
#include "runtime/attention.h"
#include "runtime/arch.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

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

/* ---------------------------------------------------------------- plain C rows */

static void scores_c(const att_blk *b, int64_t n0, int64_t nk) {
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
static void softmax_c(att_blk *b, int64_t n0, int64_t nk) {
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

static void pv_c(const att_blk *b, int64_t n0, int64_t nk) {
  int64_t ld = 16 * b->vq;
  for (int64_t n = 0; n < nk; n++) {
    const float *p = b->s + n * ld, *v = b->V + (n0 + n) * b->vsk;
    for (int64_t c = 0; c < b->dv; c++) {
      float a = v[c * b->vsd];
      for (int l = 0; l < b->rows; l++) b->acc[c * ld + l] += a * p[l];
    }
  }
}

void primc_att_tile_c(att_blk *b, int64_t n0, int64_t nk) {
  scores_c(b, n0, nk);
  softmax_c(b, n0, nk);
  pv_c(b, n0, nk);
}

/* ---------------------------------------------------------------- the rows */

static const struct {
  const char *name;
  int isa;
  att_tile *tile;
  att_pack_q *pack_q;
  att_store_o *store_o;
} rows[] = {
#define PRIMC_ATTENTION_ROW(id, nm, need, tl, pq, so) [PRIMC_ATTENTION_ROW_##id] = {nm, PRIMC_ISA_##need, tl, pq, so},
#include "runtime/attention_rows.def"
#undef PRIMC_ATTENTION_ROW
};
_Static_assert(sizeof rows / sizeof rows[0] == PRIMC_ATTENTION_ROW_COUNT, "attention rows");

static int forced_row = -1;

const char *primc_attention_row_name(int row) { return row >= 0 && row < PRIMC_ATTENTION_ROW_COUNT ? rows[row].name : "?"; }

static int row_runs(int row) { return primc_isa_covers(primc_sgemm_isa(), rows[row].isa); }

int primc_attention_row_active(void) {
  int f = __atomic_load_n(&forced_row, __ATOMIC_RELAXED);
  if (f >= 0) return f;
  for (int r = 0; r < PRIMC_ATTENTION_ROW_COUNT; r++)
    if (row_runs(r)) return r;
  return PRIMC_ATTENTION_ROW_GENERIC;
}

int primc_attention_force_row(int row) {
  if (row < 0 || row >= PRIMC_ATTENTION_ROW_COUNT) {
    __atomic_store_n(&forced_row, -1, __ATOMIC_RELAXED);
    return 0;
  }
  if (!row_runs(row)) return -1;
  __atomic_store_n(&forced_row, row, __ATOMIC_RELAXED);
  return 0;
}

/* ---------------------------------------------------------------- one task: QB queries of one head */

typedef struct att_job {
  const int64_t *q;
  const float *Q, *K, *V, *M;
  float *O;
  int64_t nqb, qbs; /* query blocks a head, queries a block (the last may have fewer) */
  int row;
} att_job;

static void run_block(const att_job *j, att_blk *b, int64_t b0, int64_t b1, int64_t m0) {
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
  if (rows[j->row].pack_q && q[A_Q + 4] == 1)
    rows[j->row].pack_q(b, Qp + m0 * q[A_Q + 3], q[A_Q + 3], scale);
  else
    for (int64_t l = 0; l < b->rows; l++) {
      const float *x = Qp + (m0 + l) * q[A_Q + 3];
      for (int64_t d = 0; d < D; d++) b->qt[d * lanes + l] = x[d * q[A_Q + 4]] * scale;
    }
  memset(b->acc, 0, sizeof(float) * (size_t)(Dv * lanes));
  for (int l = 0; l < QB; l++) b->mx[l] = -INFINITY, b->sum[l] = 0;
  /* with a causal mask, keys past the block's last query are never read */
  int64_t kend = b->causal && m0 + b->rows < Sk ? m0 + b->rows : Sk;
  for (int64_t n0 = 0; n0 < kend; n0 += KT) rows[j->row].tile(b, n0, kend - n0 < KT ? kend - n0 : KT);
  /* a row with no attendable key: 0 / 0, as the softmax's prims give */
  if (rows[j->row].store_o && q[A_O + 4] == 1) {
    rows[j->row].store_o(b, Op + m0 * q[A_O + 3], q[A_O + 3]);
    return;
  }
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
  att_blk b = {.d = D, .dv = Dv, .ksk = q[A_K + 3], .ksd = q[A_K + 4], .vsk = q[A_V + 3], .vsd = q[A_V + 4],
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
               primc_attention_row_active()};
  /* the vector rows gather a mask that varies along the queries with 32-bit lane offsets */
  if (j.M && (q[A_M + 3] > INT32_MAX / QB || q[A_M + 3] < INT32_MIN / QB)) j.row = PRIMC_ATTENTION_ROW_GENERIC;
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
 * tuning row per attention row as runtime/conv/plan.c's per CPU kind. A task's queries fill whole vectors
 * of 16, so below min_queries the call computes lanes no query uses (up to 16x the GEMM's multiply-adds
 * for one query) and the GEMM's rows win; from there the call, which neither stores nor rereads the
 * scores, wins. Figures: bench/attention.md. */
static const int64_t min_queries[] = {
#if PRIMC_X86
    /* Emerald Rapids, 12 heads of 64, Sk 64 to 2048: the GEMMs win up to 24 queries (Sk 2048: 2.4 ms
     * against 3.2), the call from 32 (3.4 ms against 3.9); Zen 4 (one zmm FMA a cycle) not measured */
    [PRIMC_ATTENTION_ROW_AVX512] = 32,
    /* Zen 3, 12 heads of 64: the call from one query (Sq 1 over Sk 512: 0.51 ms against 1.0-1.3 for the GEMMs,
     * K's and V's head transposes and the softmax kernels; Sq 32: 1.5 against 2.2-3.3) */
    [PRIMC_ATTENTION_ROW_AVX2] = 1,
#endif
    /* far slower than the GEMM's vector rows: never */
    [PRIMC_ATTENTION_ROW_GENERIC] = INT64_MAX,
};
_Static_assert(sizeof min_queries / sizeof min_queries[0] == PRIMC_ATTENTION_ROW_COUNT, "a tuning per attention row");

static int force_fuse = -1;

void primc_attention_force_fuse(int on) { force_fuse = on; }

int primc_attention_pays_for(int row, int64_t sq, int64_t sk) {
  (void)sk;
  if (force_fuse >= 0) return force_fuse;
  return sq >= min_queries[row >= 0 && row < PRIMC_ATTENTION_ROW_COUNT ? row : PRIMC_ATTENTION_ROW_GENERIC];
}

int primc_attention_pays(int64_t sq, int64_t sk) { return primc_attention_pays_for(primc_attention_row_active(), sq, sk); }
