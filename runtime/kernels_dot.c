/* runtime/kernels_dot.c: the dot_general call: batched f32 through our GEMM (B packed at compile time or not), or through the bf16 GEMM under a lower matmul precision, f64 through ours, other dtypes element by element, then the fused epilogue. */
#include "runtime/kernels.h"

#if PRIMC_X86
#include <immintrin.h>
#endif

/* ---------------------------------------------------------------- dot_general */

/* a strided [R, C] matrix as a BLAS operand; 0 when neither stride is 1 */
static int blas_layout(int64_t R, int64_t C, int64_t sr, int64_t sc, int *trans, int64_t *ld) {
  if (sc == 1 || C == 1) {
    *trans = 0;
    *ld = R == 1 ? C : sr;
    if (*ld < C) *ld = C;
    return 1;
  }
  if (sr == 1 || R == 1) {
    *trans = 1;
    *ld = sc;
    if (*ld < R) *ld = R;
    return 1;
  }
  return 0;
}

static void dot_generic(int dt, int64_t M, int64_t N, int64_t K, const char *a, int64_t sm, int64_t sk,
                        const char *b, int64_t bk, int64_t bn, char *o) {
  for (int64_t m = 0; m < M; m++)
    for (int64_t n = 0; n < N; n++) {
      if (is_float(dt)) {
        double acc = 0;
        for (int64_t k = 0; k < K; k++) acc += get_f(a, m * sm + k * sk, dt) * get_f(b, k * bk + n * bn, dt);
        set_f(o, m * N + n, dt, acc);
      } else {
        uint64_t acc = 0;
        for (int64_t k = 0; k < K; k++)
          acc += (uint64_t)get_i(a, m * sm + k * sk, dt) * (uint64_t)get_i(b, k * bk + n * bn, dt);
        set_i(o, m * N + n, dt, (int64_t)acc);
      }
    }
}

/* elements of C below which the epilogue runs on the calling thread */
#define EPI_SPLIT_ELEMS 32768

/* one batch of a strided dot: f32 and f64 through our GEMMs, the rest element by element */
typedef struct dot_job {
  const primc_dot_shape *s;
  void *const *bufs;
  int blas, ta, tb;
  int64_t lda, ldb;
} dot_job;

static void dot_batch(const dot_job *j, int64_t i) {
  const primc_dot_shape *s = j->s;
  int dt = s->dt;
  int64_t M = s->M, N = s->N, K = s->K, i1 = i / s->B2, i2 = i % s->B2;
  size_t es = dsize(dt);
  const char *ai = (const char *)j->bufs[1] + (size_t)(i1 * s->a_sb + i2 * s->a_sb2) * es;
  const char *bi = (const char *)j->bufs[2] + (size_t)(i1 * s->b_sb + i2 * s->b_sb2) * es;
  char *oi = (char *)j->bufs[0] + (size_t)(i * M * N) * es;
  if (!j->blas)
    dot_generic(dt, M, N, K, ai, s->a_sm, s->a_sk, bi, s->b_sk, s->b_sn, oi);
  else if (dt == PRIMC_F32)
    primc_sgemm(j->ta, j->tb, M, N, K, 1.0f, (const float *)ai, j->lda, (const float *)bi, j->ldb, 0.0f, (float *)oi, N);
  else
    primc_dgemm(j->ta, j->tb, M, N, K, (const double *)ai, j->lda, (const double *)bi, j->ldb, (double *)oi, N);
}

static void dot_batches(void *ctx, int64_t b, int64_t e) {
  for (int64_t i = b; i < e; i++) dot_batch(ctx, i);
}

/* below this many multiply-adds per batch, batches (attention heads) go to the threads whole */
#define DOT_BATCH_SPLIT_FLOPS (1 << 22)

static int dot_run(const primc_dot_shape *s, void *const *bufs) {
  if (s->M * s->N == 0 || s->B == 0) return PRIMC_OK;
  if (s->B2 < 1) return PRIMC_ERR_RUNTIME;
  dot_job j = {s, bufs, 0, 0, 0, 0, 0};
  j.blas = (s->dt == PRIMC_F32 || s->dt == PRIMC_F64) && s->K > 0 && blas_layout(s->M, s->K, s->a_sm, s->a_sk, &j.ta, &j.lda) &&
           blas_layout(s->K, s->N, s->b_sk, s->b_sn, &j.tb, &j.ldb);
  double flops = (double)s->M * (double)s->N * (double)s->K;
  if (s->B > 1 && j.blas && s->dt == PRIMC_F32 && flops < DOT_BATCH_SPLIT_FLOPS && flops * (double)s->B >= (1 << 18))
    primc_parallel_for(s->B, dot_batches, &j); /* primc_sgemm runs inline on a pool thread */
  else
    dot_batches(&j, 0, s->B);
  return PRIMC_OK;
}

/* params: dtype, B, M, N, K, a strides (batch, m, k), b strides (batch, k, n); out is [B, M, N] */
int primc_k_dot(const int64_t *q, void *const *bufs) {
  primc_dot_shape s = primc_dot_shape_of(q, 0);
  return dot_run(&s, bufs);
}

/* params: dtype, B1, B2, M, N, K, a strides (b1, b2, m, k), b strides (b1, b2, k, n); out is [B1, B2, M, N] */
int primc_k_dot_b2(const int64_t *q, void *const *bufs) {
  primc_dot_shape s = primc_dot_shape_of(q, 1);
  return dot_run(&s, bufs);
}

/* primc_rt.h's layout: the columns' offsets (c, then the taps row-major) and the pixels' (image, then o..
 * row-major) into the scratch, then one GEMM whose B panels are packed from xp directly */
int primc_k_dot_cols(const int64_t *q, void *const *bufs) {
  int64_t M = q[0], K = q[1], C = q[4], images = q[6], taps = 1, pix = 1;
  int ns = (int)q[8], ta = 0;
  int64_t lda = 0;
  if (ns < 1 || ns > 3 || M < 0 || C < 0 || images < 0) return PRIMC_ERR_RUNTIME;
  for (int s = 0; s < ns; s++) {
    if (q[9 + s] < 1 || q[15 + s] < 1) return PRIMC_ERR_RUNTIME;
    pix *= q[9 + s], taps *= q[15 + s];
  }
  int a_mode = (int)q[22];
  if (K != images * pix || (a_mode ? a_mode != 1 || q[2] < 0 : !blas_layout(M, K, q[2], q[3], &ta, &lda)))
    return PRIMC_ERR_RUNTIME;
  if (q[28] == PRIMC_WGRAD_WINOGRAD) {
    /* a(m, image, row, col) in place, or from [M, K] whose k runs over images, rows, columns */
    if (ns != 2 || q[15] != 3 || q[16] != 3 || q[12] != q[18] || q[13] != q[19]) return PRIMC_ERR_RUNTIME;
    primc_wgrad w = {M, C, images, q[9], q[10], bufs[2], q[21], q[5], q[7], q[12], q[13], q[29], q[30], q[31], q[32],
                     bufs[1], a_mode ? q[27] : 0, q[2], a_mode ? q[23] : pix * q[3], a_mode ? q[24] : q[10] * q[3],
                     a_mode ? q[25] : q[3], bufs[0], bufs[3]};
    return primc_wgrad_wino_run(&w);
  }
  if (q[28] != PRIMC_WGRAD_COLUMNS) return PRIMC_ERR_RUNTIME;
  int64_t N = C * taps, *gn = bufs[3], *gk = gn + N, *ak = gk + K;
  if (M * N == 0) return PRIMC_OK;
  int64_t at[3] = {0, 0, 0};
  for (int64_t t = 0; t < taps; t++) { /* the taps' offsets, then each channel's columns */
    int64_t o = 0;
    for (int s = 0; s < ns; s++) o += at[s] * q[18 + s];
    for (int64_t c = 0; c < C; c++) gn[c * taps + t] = q[21] + c * q[5] + o;
    for (int s = ns - 1; s >= 0 && ++at[s] == q[15 + s]; s--) at[s] = 0;
  }
  at[0] = at[1] = at[2] = 0;
  for (int64_t p = 0; p < pix; p++) { /* each pixel's offsets in xp and, with a_mode 1, in a */
    int64_t o = 0, oa = q[27];
    for (int s = 0; s < ns; s++) o += at[s] * q[12 + s], oa += at[s] * q[24 + s];
    for (int64_t i = 0; i < images; i++) gk[i * pix + p] = i * q[7] + o, ak[i * pix + p] = i * q[23] + oa;
    for (int s = ns - 1; s >= 0 && ++at[s] == q[9 + s]; s--) at[s] = 0;
  }
  primc_gemm g = {.M = M, .N = N, .K = K, .a = bufs[1], .lda = a_mode ? q[2] : lda, .trans_a = ta,
                  .a_koff = a_mode ? ak : NULL, .b_gather = bufs[2], .gather_n = gn, .gather_k = gk, .c = bufs[0],
                  .ldc = N};
  return primc_sgemm_run(&g);
}

/* params as dot's (B's strides unused), then the packed B's bytes; bufs: out, a, B packed by primc_sgemm_pack_b */
int primc_k_dot_packed(const int64_t *q, void *const *bufs) {
  int64_t M = q[2], N = q[3], K = q[4];
  int ta = 0;
  int64_t lda = 0;
  if (M * N == 0) return PRIMC_OK;
  if (q[0] != PRIMC_F32 || q[1] != 1 || K < 1 || !blas_layout(M, K, q[6], q[7], &ta, &lda)) return PRIMC_ERR_RUNTIME;
  /* B may come from a weights file: its header decides every read, so it is checked first */
  if (q[11] < 1 || primc_sgemm_packed_check(bufs[2], (size_t)q[11], N, K, NULL) != PRIMC_OK) return PRIMC_ERR_WEIGHTS;
  return primc_sgemm_prepacked_any(ta, M, N, K, 1.0f, bufs[1], lda, bufs[2], 0.0f, bufs[0], N, NULL, NULL);
}

/* params as dot's, then the packed B's bytes (0: B plain) and the split; bufs: out, a, B (packed by
 * primc_bgemm_pack_b when q[11] > 0). A layout the bf16 GEMM cannot read runs as the f32 dot, which is
 * more precise than asked, never less. */
typedef struct bf16_job {
  const int64_t *q;
  void *const *bufs;
  int ta, tb;
  int64_t lda, ldb;
  int st;
} bf16_job;

static void bf16_batches(void *ctx, int64_t b, int64_t e) {
  bf16_job *j = ctx;
  const int64_t *q = j->q;
  int64_t M = q[2], N = q[3], K = q[4];
  for (int64_t i = b; i < e; i++) {
    const float *a = (const float *)j->bufs[1] + i * q[5], *bb = (const float *)j->bufs[2] + i * q[8];
    int st = primc_bgemm(j->ta, j->tb, M, N, K, a, j->lda, bb, j->ldb, (int)q[12], (float *)j->bufs[0] + i * M * N, N);
    if (st != PRIMC_OK) __atomic_store_n(&j->st, st, __ATOMIC_RELAXED);
  }
}

int primc_k_dot_bf16(const int64_t *q, void *const *bufs) {
  int64_t B = q[1], M = q[2], N = q[3], K = q[4];
  if (M * N == 0) return PRIMC_OK;
  bf16_job j = {q, bufs, 0, 0, 0, 0, PRIMC_OK};
  if (q[0] != PRIMC_F32 || K < 1 || (q[12] != 1 && q[12] != 3)) return PRIMC_ERR_RUNTIME;
  if (q[11] > 0) { /* B from the weights: its header decides every read, so it is checked first */
    if (B != 1 || !blas_layout(M, K, q[6], q[7], &j.ta, &j.lda)) return PRIMC_ERR_RUNTIME;
    if (primc_bgemm_packed_check(bufs[2], (size_t)q[11], N, K, (int)q[12]) != PRIMC_OK) return PRIMC_ERR_WEIGHTS;
    return primc_bgemm_prepacked(j.ta, M, N, K, bufs[1], j.lda, bufs[2], bufs[0], N);
  }
  if (!blas_layout(M, K, q[6], q[7], &j.ta, &j.lda) || !blas_layout(K, N, q[9], q[10], &j.tb, &j.ldb))
    return primc_k_dot(q, bufs);
  double flops = (double)M * (double)N * (double)K;
  if (B > 1 && flops < DOT_BATCH_SPLIT_FLOPS && flops * (double)B >= (1 << 18))
    primc_parallel_for(B, bf16_batches, &j); /* primc_bgemm runs inline on a pool thread */
  else
    bf16_batches(&j, 0, B);
  return j.st;
}

/* out[i] (+)= (int32) cf[i] for i < n, cf holding exact integers; the add wraps as int32 arithmetic does */
typedef struct int_add_job {
  int32_t *out;
  const float *cf;
  int64_t n;
  int first;
} int_add_job;

static void int_add_scalar(int32_t *out, const float *cf, int64_t n, int first) {
  for (int64_t i = 0; i < n; i++) out[i] = first ? (int32_t)cf[i] : (int32_t)((uint32_t)out[i] + (uint32_t)(int32_t)cf[i]);
}

#if PRIMC_X86
__attribute__((target("avx512f"))) static void int_add_512(int32_t *out, const float *cf, int64_t n, int first) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    __m512i v = _mm512_cvttps_epi32(_mm512_loadu_ps(cf + i));
    if (!first) v = _mm512_add_epi32(v, _mm512_loadu_si512(out + i));
    _mm512_storeu_si512(out + i, v);
  }
  int_add_scalar(out + i, cf + i, n - i, first);
}
#endif

#define INT_ADD_BLOCK 4096 /* elements of one item of the split over the pool */

static void int_add(void *ctx, int64_t b, int64_t e) {
  const int_add_job *j = ctx;
  int64_t i0 = b * INT_ADD_BLOCK, i1 = e * INT_ADD_BLOCK < j->n ? e * INT_ADD_BLOCK : j->n;
#if PRIMC_X86
  if (primc_sgemm_isa() == PRIMC_ISA_AVX512) {
    int_add_512(j->out + i0, j->cf + i0, i1 - i0, j->first);
    return;
  }
#endif
  int_add_scalar(j->out + i0, j->cf + i0, i1 - i0, j->first);
}

/* params as dot's, then the packed B's bytes and the K chunk; bufs: out (i32), a (i32 within [-256, 256], as
 * codegen proved), B packed per K chunk (primc_bgemm_pack_b_int), an f32 scratch of M x N. Each chunk's sums are
 * exact integers in f32 (primc_bgemm_prepacked_int; codegen sized the chunk from the operands' ranges), added
 * in int32, which wraps as the prims' integer sums do. */
int primc_k_dot_int(const int64_t *q, void *const *bufs) {
  int64_t M = q[2], N = q[3], K = q[4], chunk = q[12], lda;
  int ta;
  if (M * N == 0) return PRIMC_OK;
  if (q[0] != PRIMC_I32 || q[1] != 1 || K < 1 || q[11] < 1 || chunk < 1 || chunk > PRIMC_BGEMM_INT_K ||
      !blas_layout(M, K, q[6], q[7], &ta, &lda))
    return PRIMC_ERR_RUNTIME;
  const char *pk = bufs[2];
  size_t avail = (size_t)q[11], off = 0;
  int32_t *out = bufs[0];
  float *cf = bufs[3];
  for (int64_t k0 = 0; k0 < K; k0 += chunk) {
    int64_t kc = K - k0 < chunk ? K - k0 : chunk;
    size_t sz = primc_bgemm_packed_b_size(N, kc, 1); /* primc_bgemm_pack_b_int's chunk */
    /* B may come from a weights file: each chunk's header is checked before it is read */
    if (off > avail || primc_bgemm_packed_check(pk + off, avail - off, N, kc, 1) != PRIMC_OK) return PRIMC_ERR_WEIGHTS;
    const int32_t *a = (const int32_t *)bufs[1] + (ta ? k0 * lda : k0);
    int st = primc_bgemm_prepacked_int(ta, M, N, kc, a, lda, pk + off, cf, N);
    if (st != PRIMC_OK) return st;
    int_add_job aj = {out, cf, M * N, k0 == 0};
    int64_t items = (M * N + INT_ADD_BLOCK - 1) / INT_ADD_BLOCK;
    if (items > 1) primc_parallel_for(items, int_add, &aj);
    else int_add(&aj, 0, items);
    off += sz;
  }
  return PRIMC_OK;
}


/* the GEMM over all of C, then the epilogue split over the threads by rows while C is in cache */
static int dot_then_epilogue(int (*dot)(const int64_t *, void *const *), const int64_t *q, void *const *bufs,
                             void (*epi)(void *, int64_t, int64_t), void *ctx) {
  int64_t M = q[2], N = q[3];
  int st = dot(q, bufs);
  if (st != PRIMC_OK || M == 0) return st;
  if (q[1] == 1 && M > 1 && M * N >= EPI_SPLIT_ELEMS)
    primc_parallel_for(M, epi, ctx);
  else
    epi(ctx, 0, M);
  return PRIMC_OK;
}

/* dot with an elementwise epilogue over [M, N] rows [begin, end) */
int primc_k_dot_epi(const int64_t *q, void *const *bufs, void (*epi)(void *, int64_t, int64_t), void *ctx) {
  return dot_then_epilogue(primc_k_dot, q, bufs, epi, ctx);
}

int primc_k_dot_packed_epi(const int64_t *q, void *const *bufs, void (*epi)(void *, int64_t, int64_t), void *ctx) {
  return dot_then_epilogue(primc_k_dot_packed, q, bufs, epi, ctx);
}

int primc_k_dot_bf16_epi(const int64_t *q, void *const *bufs, void (*epi)(void *, int64_t, int64_t), void *ctx) {
  return dot_then_epilogue(primc_k_dot_bf16, q, bufs, epi, ctx);
}

int primc_k_dot_int_epi(const int64_t *q, void *const *bufs, void (*epi)(void *, int64_t, int64_t), void *ctx) {
  return dot_then_epilogue(primc_k_dot_int, q, bufs, epi, ctx);
}
