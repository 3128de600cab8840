/* tests/unit/test_gemm.c: primc_sgemm (every kernel family) and primc_conv2d_f32 against naive double-precision loops. */
#include "runtime/primc_rt.h"
#include "runtime/gemm/gemm.h"
#include "tests/test.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static float frand(void) {
  rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
  return (float)((rng_state >> 40) & 0xFFFFFF) / (float)0x800000 - 1.0f; /* [-1, 1) */
}

static float *rand_buf(int64_t n) {
  float *p = malloc((size_t)(n > 0 ? n : 1) * sizeof(float));
  for (int64_t i = 0; i < n; i++) p[i] = frand();
  return p;
}

/* the ISAs this CPU runs, scalar first */
static int isas(int *out) {
  int n = 0;
  for (int i = PRIMC_ISA_SCALAR; i < PRIMC_ISA_COUNT; i++)
    if (primc_sgemm_force_isa(i) == 0) out[n++] = i;
  primc_sgemm_force_isa(PRIMC_ISA_AUTO);
  return n;
}

typedef struct gcase {
  int ta, tb;
  int64_t M, N, K, pad; /* pad: extra columns in every leading dimension */
  float alpha, beta;
} gcase;

/* C = alpha op(A) op(B) + beta C0 in double; err bound from sum |a b| scaled by K */
static int check_gemm(const gcase *t, int isa) {
  int64_t M = t->M, N = t->N, K = t->K;
  int64_t ar = t->ta ? K : M, ac = t->ta ? M : K, br = t->tb ? N : K, bc = t->tb ? K : N;
  int64_t lda = ac + t->pad, ldb = bc + t->pad, ldc = N + t->pad;
  float *A = rand_buf(ar * lda), *B = rand_buf(br * ldb), *C = rand_buf(M * ldc), *C0 = malloc(sizeof(float) * (size_t)(M * ldc + 1));
  memcpy(C0, C, sizeof(float) * (size_t)(M * ldc));
  if (t->beta == 0)
    for (int64_t i = 0; i < M * ldc; i++) C[i] = NAN; /* beta == 0 must not read C */
  primc_sgemm_force_isa(isa);
  int st = primc_sgemm(t->ta, t->tb, M, N, K, t->alpha, A, lda, B, ldb, t->beta, C, ldc);
  primc_sgemm_force_isa(PRIMC_ISA_AUTO);
  int ok = CHECK_INT(st, PRIMC_OK);
  for (int64_t m = 0; m < M && ok; m++)
    for (int64_t n = 0; n < N && ok; n++) {
      double acc = 0, mag = 0;
      for (int64_t k = 0; k < K; k++) {
        double a = t->ta ? A[k * lda + m] : A[m * lda + k], b = t->tb ? B[n * ldb + k] : B[k * ldb + n];
        acc += a * b;
        mag += fabs(a * b);
      }
      double ref = t->alpha * acc + (t->beta == 0 ? 0 : t->beta * (double)C0[m * ldc + n]);
      double tol = 2.0 * (double)(K + 2) * FLT_EPSILON * (fabs(t->alpha) * mag + fabs(t->beta) + 1.0);
      double got = C[m * ldc + n];
      ok = CHECK_MSG(fabs(got - ref) <= tol, "%s ta=%d tb=%d M=%lld N=%lld K=%lld alpha=%g beta=%g C[%lld][%lld]=%g, want %g",
                     primc_sgemm_isa_name(isa), t->ta, t->tb, (long long)M, (long long)N, (long long)K, t->alpha,
                     t->beta, (long long)m, (long long)n, got, ref);
    }
  /* the padding columns of C are not written */
  for (int64_t m = 0; m < M && ok; m++)
    for (int64_t n = N; n < ldc && ok; n++)
      if (t->beta != 0) ok = CHECK(C[m * ldc + n] == C0[m * ldc + n]);
  free(A), free(B), free(C), free(C0);
  return ok;
}

PC_TEST(gemm_force_isa) {
  CHECK_INT(primc_sgemm_force_isa(PRIMC_ISA_SCALAR), 0);
  CHECK_INT(primc_sgemm_isa(), PRIMC_ISA_SCALAR);
  CHECK_INT(primc_sgemm_force_isa(7), -1);
  CHECK_INT(primc_sgemm_force_isa(PRIMC_ISA_AUTO), 0);
  CHECK(primc_sgemm_isa() >= PRIMC_ISA_SCALAR);
  CHECK_STR(primc_sgemm_isa_name(PRIMC_ISA_SCALAR), "scalar");
}

PC_TEST(gemm_small_shapes_all_isas) {
  static const int64_t shapes[][3] = {{1, 1, 1},   {17, 33, 65}, {1, 100, 37}, {100, 1, 37}, {5, 7, 1},
                                      {14, 32, 8}, {15, 33, 9},  {29, 17, 31}, {3, 64, 64}, {64, 3, 70}};
  int is[4], n = isas(is);
  CHECK(n >= 1);
  for (int i = 0; i < n; i++)
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
      for (int tr = 0; tr < 4; tr++) {
        gcase t = {tr & 1, tr >> 1, shapes[s][0], shapes[s][1], shapes[s][2], (int64_t)(s % 3), 1.0f, 0.0f};
        if (!check_gemm(&t, is[i])) return;
      }
}

PC_TEST(gemm_alpha_beta) {
  static const float ab[][2] = {{1, 1}, {0.5f, -2}, {-1.5f, 0}, {0, 0.75f}, {2, 1}};
  int is[4], n = isas(is);
  for (int i = 0; i < n; i++)
    for (size_t a = 0; a < sizeof ab / sizeof ab[0]; a++)
      for (int tr = 0; tr < 4; tr++) {
        gcase t = {tr & 1, tr >> 1, 23, 41, 19, 3, ab[a][0], ab[a][1]};
        if (!check_gemm(&t, is[i])) return;
      }
}

/* K and N beyond one block, M beyond the in-place B threshold (300 rows: every CPU's), several items for the pool */
PC_TEST(gemm_large_shapes_all_isas) {
  static const int64_t shapes[][3] = {{90, 600, 300}, {200, 70, 520}, {16, 1100, 40}, {7, 50, 1000}, {130, 129, 257},
                                      {300, 90, 130}};
  int is[4], n = isas(is);
  for (int i = 0; i < n; i++)
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
      for (int tr = 0; tr < 4; tr += (s == 0 ? 1 : 3)) {
        gcase t = {tr & 1, tr >> 1, shapes[s][0], shapes[s][1], shapes[s][2], 5, 1.0f, tr == 3 ? 0.5f : 0.0f};
        if (!check_gemm(&t, is[i])) return;
      }
}

/* B read in place up to the row's rows (tuned on Zen 4), 128 on Zen 5, 256 on Intel's AVX-512 cores, where
 * packing B costs relatively more (bench/gemm_rows.md); the shapes above cross each */
PC_TEST(gemm_direct_rows_by_cpu) {
  int is[4], n = isas(is);
  for (int i = 0; i < n; i++) {
    const gm_row *kr = primc_gm_row_for(is[i]);
    int64_t want = kr->direct_max;
    if (is[i] == PRIMC_ISA_AVX512 && primc_gm_amd_family() == 0) want = 256;
    if (is[i] == PRIMC_ISA_AVX512 && primc_gm_amd_family() >= 0x1a) want = 128;
    CHECK_INT(primc_gm_direct_rows(kr), want);
    CHECK(want < 300); /* gemm_large_shapes_all_isas' 300 rows pack B */
  }
}

PC_TEST(gemm_empty_and_k0) {
  float C[6] = {1, 2, 3, 4, 5, 6}, A[1] = {0}, B[1] = {0};
  CHECK_INT(primc_sgemm(0, 0, 0, 3, 4, 1.0f, A, 4, B, 3, 0.0f, C, 3), PRIMC_OK);
  CHECK(C[0] == 1);
  CHECK_INT(primc_sgemm(0, 0, 2, 3, 0, 1.0f, A, 1, B, 3, 2.0f, C, 3), PRIMC_OK);
  CHECK(C[0] == 2 && C[5] == 12);
  CHECK_INT(primc_sgemm(0, 0, 2, 3, 0, 1.0f, A, 1, B, 3, 0.0f, C, 3), PRIMC_OK);
  CHECK(C[0] == 0 && C[5] == 0);
}

typedef struct epi_count {
  int *hits;
  int64_t N;
} epi_count;

static void count_epi(void *ctx, float *C, int64_t ldc, int64_t m0, int64_t n0, int64_t mb, int64_t nb) {
  epi_count *e = ctx;
  for (int64_t m = 0; m < mb; m++)
    for (int64_t n = 0; n < nb; n++) {
      __atomic_fetch_add(&e->hits[(m0 + m) * e->N + n0 + n], 1, __ATOMIC_RELAXED);
      C[m * ldc + n] += 1.0f;
    }
}

/* the epilogue sees every element once, after its sum is complete (packed, in-place and dot paths) */
PC_TEST(gemm_epilogue_covers_once) {
  static const int64_t cfg[][3] = {{61, 700, 0}, {20, 300, 0}, {3, 900, 1}, {40, 530, 1}};
  for (size_t c = 0; c < sizeof cfg / sizeof cfg[0]; c++) {
    int64_t M = cfg[c][0], N = cfg[c][1], K = 300;
    int tb = (int)cfg[c][2];
    float *A = rand_buf(M * K), *B = rand_buf(K * N), *C = rand_buf(M * N), *R = rand_buf(M * N);
    int *hits = calloc((size_t)(M * N), sizeof(int));
    epi_count e = {hits, N};
    CHECK_INT(primc_sgemm(0, tb, M, N, K, 1.0f, A, K, B, tb ? K : N, 0.0f, R, N), PRIMC_OK);
    CHECK_INT(primc_sgemm_epi(0, tb, M, N, K, 1.0f, A, K, B, tb ? K : N, 0.0f, C, N, count_epi, &e), PRIMC_OK);
    int ok = 1;
    for (int64_t i = 0; i < M * N && ok; i++) ok = CHECK(hits[i] == 1 && C[i] == R[i] + 1.0f);
    free(A), free(B), free(C), free(R), free(hits);
  }
}

PC_TEST(gemm_rejects_bad_args) {
  float A[12] = {0}, B[12] = {0}, C[12] = {0};
  CHECK_INT(primc_sgemm(0, 0, 3, 4, 4, 1.0f, A, 3, B, 4, 0.0f, C, 4), PRIMC_ERR_ARG); /* lda < K */
  CHECK_INT(primc_sgemm(0, 1, 3, 4, 2, 1.0f, A, 2, B, 1, 0.0f, C, 4), PRIMC_ERR_ARG); /* ldb < K for B^T */
  CHECK_INT(primc_sgemm(0, 0, 3, 4, 2, 1.0f, A, 2, B, 4, 0.0f, C, 3), PRIMC_ERR_ARG); /* ldc < N */
  CHECK_INT(primc_sgemm(0, 0, 3, 4, 2, 1.0f, A, 2, NULL, 4, 0.0f, C, 4), PRIMC_ERR_ARG);
  CHECK_INT(primc_sgemm(0, 0, -1, 4, 2, 1.0f, A, 2, B, 4, 0.0f, C, 4), PRIMC_ERR_ARG);
  CHECK_INT(primc_sgemm(1, 0, 3, 4, 2, 1.0f, A, 3, B, 4, 0.0f, C, 4), PRIMC_OK); /* A^T: lda >= M */
}

PC_TEST(gemm_prepacked_b) {
  int is[4], n = isas(is);
  for (int i = 0; i < n; i++)
    for (int tb = 0; tb < 2; tb++) {
      primc_sgemm_force_isa(is[i]);
      int64_t M = 37, N = 545, K = 270;
      float *A = rand_buf(M * K), *B = rand_buf(K * N), *C = rand_buf(M * N), *R = rand_buf(M * N);
      size_t sz = primc_sgemm_packed_b_size(N, K);
      void *pk = aligned_alloc(64, (sz + 63) / 64 * 64);
      CHECK_INT(primc_sgemm_pack_b(tb, N, K, B, tb ? K : N, pk), PRIMC_OK);
      CHECK_INT(primc_sgemm(0, tb, M, N, K, 1.0f, A, K, B, tb ? K : N, 0.0f, R, N), PRIMC_OK);
      CHECK_INT(primc_sgemm_prepacked(0, M, N, K, 1.0f, A, K, pk, 0.0f, C, N, NULL, NULL), PRIMC_OK);
      CHECK(memcmp(C, R, sizeof(float) * (size_t)(M * N)) == 0); /* same kernels, same order: bitwise equal */
      CHECK_INT(primc_sgemm_prepacked(0, M, N + 1, K, 1.0f, A, K, pk, 0.0f, C, N + 1, NULL, NULL), PRIMC_ERR_ARG);
      primc_sgemm_force_isa(PRIMC_ISA_AUTO);
      free(A), free(B), free(C), free(R), free(pk);
    }
}

/* panels packed for one ISA and read on another (a binary compiled on another machine):
 * the same numbers as an unpacked GEMM on the running ISA, within rounding */
PC_TEST(gemm_prepacked_any_isa) {
  int is[4], n = isas(is);
  for (int p = 0; p < n; p++)
    for (int r = 0; r < n; r++)
      for (int tb = 0; tb < 2; tb++) {
        int64_t M = 19, N = 77, K = 300;
        float *A = rand_buf(M * K), *B = rand_buf(K * N), *C = rand_buf(M * N), *R = rand_buf(M * N);
        primc_sgemm_force_isa(is[p]);
        size_t sz = primc_sgemm_packed_b_size(N, K);
        void *pk = aligned_alloc(64, (sz + 63) / 64 * 64);
        CHECK_INT(primc_sgemm_pack_b(tb, N, K, B, tb ? K : N, pk), PRIMC_OK);
        primc_sgemm_force_isa(is[r]);
        CHECK_INT(primc_sgemm(0, tb, M, N, K, 1.0f, A, K, B, tb ? K : N, 0.0f, R, N), PRIMC_OK);
        CHECK_INT(primc_sgemm_prepacked_any(0, M, N, K, 1.0f, A, K, pk, 0.0f, C, N, NULL, NULL), PRIMC_OK);
        double worst = 0;
        for (int64_t i = 0; i < M * N; i++) worst = fmax(worst, fabs((double)C[i] - R[i]) / (1 + fabs((double)R[i])));
        CHECK_MSG(worst < 1e-5, "packed on %s, run on %s: rel error %g", primc_sgemm_isa_name(is[p]),
                  primc_sgemm_isa_name(is[r]), worst);
        CHECK_INT(primc_sgemm_prepacked_any(0, M, N + 1, K, 1.0f, A, K, pk, 0.0f, C, N + 1, NULL, NULL), PRIMC_ERR_ARG);
        primc_sgemm_force_isa(PRIMC_ISA_AUTO);
        free(A), free(B), free(C), free(R), free(pk);
      }
}

/* A[m][:] . B[:][col] in double, A [M][K] and B [K][N] row-major */
static double ref_dot(const float *A, const float *B, int64_t K, int64_t N, int64_t m, int64_t col) {
  double acc = 0;
  for (int64_t k = 0; k < K; k++) acc += (double)A[m * K + k] * B[k * N + col];
  return acc;
}

/* the fused store (bias per row, residual, clamp) on every ISA, against the double-precision sum; a NaN
 * in the residual stays NaN through the clamp; K = 0 still applies it; packed B refuses it */
PC_TEST(gemm_fused_store_all_isas) {
  static const int64_t shapes[][3] = {{37, 70, 45}, {5, 33, 300}, {14, 16, 1}, {3, 9, 0}};
  int is[4], n = isas(is);
  for (int i = 0; i < n; i++)
    for (size_t t = 0; t < sizeof shapes / sizeof shapes[0]; t++) {
      int64_t M = shapes[t][0], N = shapes[t][1], K = shapes[t][2], ldc = N + 3;
      float *A = rand_buf(M * K), *B = rand_buf(K * N), *bias = rand_buf(2 * M), *res = rand_buf(M * ldc);
      float *C = rand_buf(M * ldc);
      res[ldc + 1] = NAN;
      primc_gemm_store st = {bias, 2, res, -0.5f, 0.75f, 0, 0, NULL, 0};
      primc_gemm g = {.M = M, .N = N, .K = K, .a = A, .lda = K, .b = B, .ldb = N, .c = C, .ldc = ldc, .store = &st};
      primc_sgemm_force_isa(is[i]);
      int ok = CHECK_INT(primc_sgemm_run(&g), PRIMC_OK);
      primc_sgemm_force_isa(PRIMC_ISA_AUTO);
      for (int64_t m = 0; m < M && ok; m++)
        for (int64_t c = 0; c < N && ok; c++) {
          double v = ref_dot(A, B, K, N, m, c) + bias[m * 2] + res[m * ldc + c], want = fmin(fmax(v, -0.5), 0.75);
          float got = C[m * ldc + c];
          if (isnan(v)) ok = CHECK_MSG(isnan(got), "%s: C[%lld][%lld] = %g, want NaN", primc_sgemm_isa_name(is[i]), (long long)m, (long long)c, got);
          else ok = CHECK_MSG(fabs(got - want) <= 4.0 * (double)(K + 3) * FLT_EPSILON, "%s %lldx%lldx%lld: C[%lld][%lld] = %g, want %g",
                              primc_sgemm_isa_name(is[i]), (long long)M, (long long)N, (long long)K, (long long)m, (long long)c, got, want);
        }
      free(A), free(B), free(bias), free(res), free(C);
    }
  float A[4] = {0}, C[4] = {0};
  primc_gemm_store st = {NULL, 0, NULL, 0.0f, 1.0f, 0, 0, NULL, 0};
  size_t sz = primc_sgemm_packed_b_size(2, 2);
  void *pk = aligned_alloc(64, (sz + 63) / 64 * 64);
  CHECK_INT(primc_sgemm_pack_b(0, 2, 2, A, 2, pk), PRIMC_OK);
  primc_gemm g = {.M = 2, .N = 2, .K = 2, .a = A, .lda = 2, .b_packed = pk, .c = C, .ldc = 2, .store = &st};
  CHECK_INT(primc_sgemm_run(&g), PRIMC_ERR_ARG);
  free(pk);
}

/* the compacting store (a direct conv's padded rows): row 9, keep 7 over 6 rows of C, K over two
 * blocks, with bias and a residual in y's layout, on every ISA; the dropped columns are never written */
PC_TEST(gemm_compacting_store_all_isas) {
  int is[4], n = isas(is);
  const int64_t M = 13, ROW = 9, KEEP = 7, ROWS = 6, N = ROW * ROWS, K = 300, P = KEEP * ROWS;
  for (int i = 0; i < n; i++) {
    float *A = rand_buf(M * K), *B = rand_buf(K * N), *bias = rand_buf(M), *res = rand_buf(M * P), *C = rand_buf(M * N);
    float *y = malloc(sizeof(float) * (size_t)(M * P));
    for (int64_t k = 0; k < M * P; k++) y[k] = NAN;
    primc_gemm_store st = {bias, 1, res, -0.5f, 0.75f, ROW, KEEP, y, P};
    primc_gemm g = {.M = M, .N = N, .K = K, .a = A, .lda = K, .b = B, .ldb = N, .c = C, .ldc = N, .store = &st};
    primc_sgemm_force_isa(is[i]);
    int ok = CHECK_INT(primc_sgemm_run(&g), PRIMC_OK);
    primc_sgemm_force_isa(PRIMC_ISA_AUTO);
    for (int64_t m = 0; m < M && ok; m++)
      for (int64_t q = 0; q < P && ok; q++) {
        double want = fmin(fmax(ref_dot(A, B, K, N, m, q / KEEP * ROW + q % KEEP) + bias[m] + res[m * P + q], -0.5), 0.75);
        ok = CHECK_MSG(fabs(y[m * P + q] - want) <= 4.0 * (double)(K + 3) * FLT_EPSILON, "%s: y[%lld][%lld] = %g, want %g",
                       primc_sgemm_isa_name(is[i]), (long long)m, (long long)q, y[m * P + q], want);
      }
    g.N = N - 1; /* not whole padded rows */
    CHECK_INT(primc_sgemm_run(&g), PRIMC_ERR_ARG);
    free(A), free(B), free(bias), free(res), free(C), free(y);
  }
}

/* ---------------------------------------------------------------- conv */

static void conv_ref(const primc_conv2d *p, const float *x, const float *w, const float *bias, double *y) {
  int64_t oh, ow;
  primc_conv2d_out_hw(p, &oh, &ow);
  int64_t cg = p->c / p->groups, og = p->o / p->groups;
  for (int64_t n = 0; n < p->n; n++)
    for (int64_t o = 0; o < p->o; o++)
      for (int64_t yy = 0; yy < oh; yy++)
        for (int64_t xx = 0; xx < ow; xx++) {
          double acc = bias ? bias[o] : 0;
          int64_t g = o / og;
          for (int64_t c = 0; c < cg; c++)
            for (int64_t i = 0; i < p->kh; i++)
              for (int64_t j = 0; j < p->kw; j++) {
                int64_t ih = yy * p->stride_h - p->pad_t + i * p->dil_h, iw = xx * p->stride_w - p->pad_l + j * p->dil_w;
                if (ih < 0 || ih >= p->h || iw < 0 || iw >= p->w) continue;
                acc += (double)x[((n * p->c + g * cg + c) * p->h + ih) * p->w + iw] *
                       w[((o * cg + c) * p->kh + i) * p->kw + j];
              }
          if (p->relu && acc < 0) acc = 0;
          y[((n * p->o + o) * oh + yy) * ow + xx] = acc;
        }
}

static int check_conv(const primc_conv2d *p, int isa, int with_bias) {
  int64_t oh, ow;
  if (!CHECK(primc_conv2d_out_hw(p, &oh, &ow))) return 0;
  int64_t nx = p->n * p->c * p->h * p->w, nw = p->o * (p->c / p->groups) * p->kh * p->kw, ny = p->n * p->o * oh * ow;
  float *x = rand_buf(nx), *w = rand_buf(nw), *b = rand_buf(p->o), *y = rand_buf(ny);
  double *r = malloc(sizeof(double) * (size_t)ny);
  conv_ref(p, x, w, with_bias ? b : NULL, r);
  /* plain weights without scratch (implicit im2col), then with the scratch (direct stride-1 convs,
   * explicit im2col), then weights packed for this ISA's tile and for a 5-row one (strips split or not) */
  int64_t kk = (p->c / p->groups) * p->kh * p->kw, og = p->o / p->groups;
  /* the channels-in-lanes path needs its im2col and C^T in the scratch whatever the layout chosen */
  primc_conv2d pw = *p; /* Winograd's scratch, where it can run (whether or not it pays on this CPU) */
  pw.w_winograd = 1;
  int64_t scratch = primc_conv2d_scratch_floats(p) + primc_conv2d_scratch_floats(&pw) + kk * oh * ow + og * oh * ow;
  int wino = p->kh == 3 && p->kw == 3 && p->stride_h == 1 && p->stride_w == 1 && p->dil_h == 1 && p->dil_w == 1 &&
             p->groups == 1;
  /* panels are sized for the ISA that packs them: the forced one, not the machine's */
  primc_sgemm_force_isa(isa);
  size_t wbytes = primc_conv2d_packed_weight_bytes(p, PRIMC_CONV_W_PANELS);
  if (primc_conv2d_packed_weight_bytes(p, PRIMC_CONV_W_WINOGRAD) > wbytes)
    wbytes = primc_conv2d_packed_weight_bytes(p, PRIMC_CONV_W_WINOGRAD);
  if (primc_conv2d_packed_weight_bytes(p, PRIMC_CONV_W_LANES) > wbytes)
    wbytes = primc_conv2d_packed_weight_bytes(p, PRIMC_CONV_W_LANES);
  /* the lanes layout holds one group; where the direct lanes row cannot run it (no AVX-512, rows over 128,
   * stride 3) its plain-loop fallback does */
  int lanes = p->groups == 1 && !(p->c == 1 && p->o == 1);
  primc_sgemm_force_isa(PRIMC_ISA_AUTO);
  float *col = rand_buf(scratch), *wp = aligned_alloc(64, (wbytes + 127) / 64 * 64);
  primc_conv_epi e = {.bias = with_bias ? b : NULL, .bias_stride = 1, .lo = p->relu ? 0.0f : -INFINITY, .hi = INFINITY};
  int ok = 1;
  for (int mode = 0; mode < 8 && ok; mode++) {
    primc_sgemm_force_isa(isa);
    primc_conv2d q = *p;
    if (mode >= 2 && primc_conv2d_weight_layout(p) == PRIMC_CONV_W_PLAIN) break;
    if ((mode == 5 || mode == 6) && !wino) continue; /* a conv compiled where Winograd pays runs it on any CPU */
    if (mode == 7) { /* output channels in the lanes: the direct row, or its fallback; refused for groups */
      q.w_lanes = 1;
      ok = ok && CHECK_INT(primc_conv2d_pack_lanes(p, w, wp), p->groups == 1 ? PRIMC_OK : PRIMC_ERR_ARG);
      if (!lanes) {
        ok = ok && CHECK_INT(primc_conv2d_f32_epi(&q, x, wp, &e, y, NULL, col), PRIMC_ERR_ARG);
        primc_sgemm_force_isa(PRIMC_ISA_AUTO);
        break;
      }
    }
    if (mode == 2 || mode == 3) {
      q.w_packed_mr = mode == 2 ? primc_sgemm_mr() : 5;
      for (int64_t g = 0; g < p->groups; g++)
        ok = ok && CHECK_INT(primc_sgemm_pack_a(og, kk, w + g * og * kk, kk, q.w_packed_mr, wp + g * og * kk), PRIMC_OK);
    } else if (mode == 5 || mode == 6) { /* Winograd, for this ISA's tile and a 5-row one */
      q.w_winograd = 1;
      q.w_packed_mr = mode == 5 ? primc_sgemm_mr() : 5;
      ok = ok && CHECK_INT(primc_conv2d_pack_winograd(p, w, q.w_packed_mr, wp), PRIMC_OK);
    } else if (mode == 4) { /* channels in the lanes: W^T panels */
      q.w_packed_panels = 1;
      for (int64_t g = 0; g < p->groups; g++)
        ok = ok && CHECK_INT(primc_sgemm_pack_b(1, og, kk, w + g * og * kk, kk,
                                                (char *)wp + g * (primc_conv2d_packed_weight_bytes(
                                                                      p, PRIMC_CONV_W_PANELS) / p->groups)),
                             PRIMC_OK);
    }
    for (int64_t i = 0; i < ny; i++) y[i] = NAN; /* an element a mode leaves unwritten must not pass on the last one's */
    int st = primc_conv2d_f32_epi(&q, x, mode >= 2 ? wp : w, &e, y, NULL, mode ? col : NULL);
    primc_sgemm_force_isa(PRIMC_ISA_AUTO);
    ok = ok && CHECK_MSG(st == PRIMC_OK, "%s conv mode %d c=%lld o=%lld %lldx%lld: status %d",
                         primc_sgemm_isa_name(isa), mode, (long long)p->c, (long long)p->o, (long long)p->h,
                         (long long)p->w, st);
    double tol = 4.0 * (double)(kk + 2) * FLT_EPSILON;
    for (int64_t i = 0; i < ny && ok; i++)
      ok = CHECK_MSG(fabs(y[i] - r[i]) <= tol,
                     "%s conv mode %d c=%lld o=%lld k=%lldx%lld s=%lld d=%lld g=%lld: y[%lld]=%g, want %g",
                     primc_sgemm_isa_name(isa), mode, (long long)p->c, (long long)p->o, (long long)p->kh,
                     (long long)p->kw, (long long)p->stride_h, (long long)p->dil_h, (long long)p->groups, (long long)i,
                     y[i], r[i]);
  }
  free(x), free(w), free(b), free(y), free(r), free(col), free(wp);
  return ok;
}

PC_TEST(gemm_conv2d_all_isas) {
  static const primc_conv2d cases[] = {
      /* n c h w   o kh kw  groups sh sw dh dw  pt pl pb pr  relu */
      {1, 3, 9, 11, 8, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0},      /* 3x3 same */
      {2, 4, 10, 9, 6, 3, 3, 1, 2, 2, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0},      /* stride 2, relu */
      {1, 5, 12, 12, 7, 3, 2, 1, 1, 2, 2, 3, 2, 0, 1, 3, 0, 0, 0, 0, 0, 0, 0},     /* dilation, uneven pads */
      {1, 6, 8, 8, 9, 3, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0},       /* groups */
      {2, 16, 7, 5, 24, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0},     /* 1x1: plain GEMM */
      {1, 16, 7, 5, 8, 1, 1, 2, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0},      /* 1x1 grouped */
      {1, 8, 9, 9, 8, 1, 1, 1, 2, 2, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0},       /* 1x1 stride 2: generated B */
      {2, 12, 11, 13, 12, 3, 3, 12, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0},  /* depthwise */
      {1, 8, 12, 10, 8, 5, 3, 8, 2, 1, 1, 2, 2, 1, 2, 2, 0, 0, 0, 0, 0, 0, 0},     /* depthwise stride, dilation */
      {1, 4, 20, 40, 5, 7, 7, 1, 2, 2, 1, 1, 3, 3, 3, 3, 0, 0, 0, 0, 0, 0, 0},     /* 7x7 stride 2, like a stem */
      {1, 3, 4, 4, 4, 3, 3, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0},       /* valid */
      {1, 40, 23, 29, 33, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0},   /* K = 360: two K blocks, N = 667 */
      {1, 3, 5, 70, 3, 3, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0},      /* depthwise, rows of 4 and 2 vectors */
      {1, 2, 7, 75, 2, 3, 3, 2, 2, 2, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0},      /* depthwise stride 2, odd width */
      {1, 2, 6, 40, 2, 5, 5, 2, 2, 2, 1, 1, 2, 2, 2, 2, 0, 0, 0, 0, 0, 0, 0},      /* depthwise 5x5 stride 2 */
      {2, 7, 6, 33, 19, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0},     /* direct (padded rows), 2 strips */
      {1, 8, 9, 40, 6, 3, 3, 2, 1, 1, 2, 2, 0, 1, 2, 3, 0, 0, 0, 0, 0, 0, 0},      /* direct: groups, dilation, uneven pads */
      {1, 3, 5, 36, 30, 5, 2, 1, 1, 1, 1, 1, 2, 0, 2, 1, 0, 0, 0, 0, 0, 0, 0},     /* direct: 5x2 kernel, 3 strips */
      {1, 24, 7, 7, 48, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0},     /* 7x7 map: channels in the lanes */
      {1, 96, 7, 7, 96, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0},     /* channels in the lanes, im2col split by channel */
      {1, 5, 12, 70, 7, 3, 3, 1, 2, 2, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0},     /* direct stride 2: 4 phases */
      {1, 3, 13, 100, 9, 7, 7, 1, 2, 2, 1, 1, 3, 3, 3, 3, 1, 0, 0, 0, 0, 0, 0},    /* direct 7x7/2 stem */
      {1, 3, 11, 80, 4, 3, 3, 1, 2, 2, 2, 2, 2, 2, 2, 2, 0, 0, 0, 0, 0, 0, 0},     /* stride 2 dilation 2: one phase */
      {1, 2, 10, 90, 3, 4, 4, 1, 3, 3, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0},     /* direct stride 3, even kernel */
      {1, 4, 9, 70, 5, 3, 3, 1, 1, 2, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0},      /* direct, strides 1 x 2 */
      {2, 40, 5, 6, 34, 1, 1, 2, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0},     /* 1x1 grouped, two images */
      {1, 128, 11, 13, 130, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0}, /* Winograd, partial tiles */
      {2, 128, 16, 10, 130, 3, 3, 1, 1, 1, 1, 1, 0, 1, 2, 1, 0, 0, 0, 0, 0, 0, 0}, /* Winograd, uneven pads, 2 images */
      {1, 128, 6, 40, 128, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0},  /* Winograd, 20 tiles across */
      {1, 5, 7, 7, 5, 3, 3, 5, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0},       /* depthwise 7x7 plane: one flat row of 4 vectors */
      {1, 2, 9, 3, 2, 3, 3, 2, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0},       /* depthwise 3 columns: a vector wraps 5 rows */
      {2, 3, 41, 40, 3, 5, 5, 3, 1, 1, 1, 1, 2, 2, 2, 2, 1, 0, 0, 0, 0, 0, 0},     /* depthwise 5x5, 103 vectors: two chunks of masks */
      {1, 4, 10, 12, 4, 3, 3, 4, 1, 1, 2, 2, 0, 2, 3, 2, 0, 0, 0, 0, 0, 0, 0},     /* depthwise dilation 2, oh != h, ow == w */
      {1, 6, 14, 14, 6, 3, 3, 6, 2, 2, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0},     /* depthwise stride 2, 7 rows of 7: one block of 7 rows */
      {1, 3, 30, 31, 3, 5, 5, 3, 2, 2, 1, 2, 2, 3, 2, 1, 0, 0, 0, 0, 0, 0, 0},     /* depthwise stride 2, dilation 2, odd and even taps */
      {1, 2, 33, 90, 2, 3, 3, 2, 2, 2, 1, 1, 1, 0, 1, 1, 0, 0, 0, 0, 0, 0, 0},     /* depthwise stride 2, 45 columns, 17 rows */
      {1, 1, 130, 260, 1, 5, 5, 1, 2, 2, 1, 1, 2, 2, 2, 2, 0, 0, 0, 0, 0, 0, 0},   /* depthwise stride 2, plane too big to split */
      {1, 4, 9, 11, 4, 3, 3, 4, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0},      /* depthwise stride 1 valid: rows of 9 */
      {2, 20, 14, 14, 20, 3, 3, 20, 2, 2, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0},  /* depthwise stride 2, channels in lanes: 16 + 4 */
      {1, 17, 60, 60, 17, 3, 3, 17, 2, 2, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0},  /* channels in lanes, 30 rows in bands of 7 */
      {1, 33, 20, 21, 33, 5, 5, 33, 2, 2, 2, 2, 3, 2, 1, 4, 0, 0, 0, 0, 0, 0, 0},  /* channels in lanes, 5x5 dilated, uneven pads */
      {1, 18, 9, 16, 18, 3, 3, 18, 1, 2, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0},   /* channels in lanes, stride 2 across only */
      {1, 20, 9, 100, 20, 3, 3, 20, 2, 2, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0},  /* stride 2, 50 wide: lanes on Zen 4, rows elsewhere */
      {1, 96, 6, 9, 32, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0},     /* narrowing 1x1: channels in the lanes */
      {2, 20, 9, 40, 40, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0},   /* lanes: 2 blocks (8 lanes padding), 2 chunks */
      {2, 8, 40, 40, 64, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0},   /* lanes: weights under x's bytes, threads take bands */
      {1, 4, 5, 6, 8, 3, 3, 1, 1, 1, 1, 1, 4, 4, 3, 5, 0, 0, 0, 0, 0, 0, 0},       /* pads past the kernel: rows, pixels of no taps */
      {1, 9, 6, 128, 32, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0},    /* lanes: bands of one 128-wide row */
      {1, 2, 3, 150, 3, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0},     /* rows too wide for the lanes conv */
      {1, 16, 15, 29, 64, 3, 3, 1, 2, 2, 1, 1, 1, 0, 1, 2, 1, 0, 0, 0, 0, 0, 0},   /* lanes stride 2, uneven pads */
      {1, 24, 10, 30, 32, 3, 5, 1, 1, 1, 2, 3, 2, 6, 2, 5, 0, 0, 0, 0, 0, 0, 0},   /* lanes: dilation 2 x 3, runs of columns */
      {2, 20, 14, 14, 20, 3, 3, 20, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0},  /* depthwise 3x3/1 in lanes: 16 + 4, 2 images */
      {1, 17, 9, 30, 17, 5, 5, 17, 1, 1, 1, 1, 2, 2, 2, 2, 0, 0, 0, 0, 0, 0, 0},   /* depthwise 5x5/1 in lanes: columns 8 + 8 + 8 + 4 + 1 + 1 */
      {1, 32, 12, 40, 32, 3, 3, 32, 2, 1, 1, 1, 0, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0},  /* depthwise 3x3, strides 2 x 1, uneven pads */
      {1, 32, 11, 21, 32, 3, 3, 32, 1, 2, 2, 1, 2, 1, 2, 1, 0, 0, 0, 0, 0, 0, 0},  /* depthwise 3x3, strides 1 x 2, dilation 2 down */
      {1, 32, 8, 400, 32, 3, 3, 32, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0},  /* depthwise rows too wide for a lanes tile */
  };
  int is[4], n = isas(is);
  for (int i = 0; i < n; i++)
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++)
      if (!check_conv(&cases[c], is[i], (int)(c % 2 == 0))) return;
}

/* a strided conv that never reads the last input row or column (1x1/2 on an even map, as ResNet's
 * downsamples) is the 2-D conv with no end padding, not a conv the 2-D path refuses */
PC_TEST(gemm_conv2d_of_params_unread_tail) {
  enum { RANKW = 1 + PRIMC_MAX_RANK, AT = 1 + 3 * RANKW + 1 + 4 * PRIMC_MAX_RANK };
  int64_t q[AT + PRIMC_CONV_EPI_WORDS] = {PRIMC_F32};
  const int64_t shapes[3][4] = {{1, 256, 56, 56}, {512, 256, 1, 1}, {1, 512, 28, 28}};
  for (int s = 0; s < 3; s++) {
    q[1 + s * RANKW] = 4;
    for (int d = 0; d < 4; d++) q[1 + s * RANKW + 1 + d] = shapes[s][d];
  }
  int64_t *groups = q + 1 + 3 * RANKW, *stride = groups + 1, *pad = stride + PRIMC_MAX_RANK;
  int64_t *dil = pad + PRIMC_MAX_RANK, *ldil = dil + PRIMC_MAX_RANK;
  *groups = 1;
  for (int d = 0; d < PRIMC_MAX_RANK; d++) stride[d] = 2, dil[d] = ldil[d] = 1;
  primc_conv2d p;
  if (!CHECK_INT(primc_conv2d_of_params(q, &p), 1)) return;
  CHECK(p.pad_b == 0 && p.pad_r == 0 && p.stride_h == 2 && p.o == 512);
  q[1 + 2 * RANKW + 3] = 27; /* fewer outputs than the input makes: not a conv these pads describe */
  CHECK_INT(primc_conv2d_of_params(q, &p), 0);
}

/* the weight layout follows where the lanes are better used: pixels unless the map is small */
PC_TEST(gemm_conv2d_weight_layout) {
  primc_conv2d big = {1, 128, 28, 28, 128, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0};
  primc_conv2d small = {1, 512, 7, 7, 512, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0};
  primc_conv2d dw = {1, 32, 7, 7, 32, 3, 3, 32, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0};
  primc_conv2d strided = {1, 64, 56, 56, 64, 3, 3, 1, 2, 2, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0};
  primc_conv2d pw_small = {1, 512, 7, 7, 2048, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0};
  /* narrowing 1x1s: into few channels the lanes, unless the map is wide and the input shallow */
  primc_conv2d narrow = {1, 192, 28, 28, 32, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0};
  primc_conv2d narrow_wide = {1, 32, 112, 112, 16, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0};
  primc_conv2d narrow_many = {1, 512, 28, 28, 128, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0};
  /* 64 channels on a map this wide: Winograd with AVX-512 (Zen 4, Zen 5, Intel's two-FMA cores), the lanes on AVX2 */
  primc_conv2d mid = {1, 64, 56, 56, 64, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0};
#if PRIMC_X86
  __builtin_cpu_init();
  CHECK_INT(primc_cpu_zmm_fmas() > 0, __builtin_cpu_supports("avx512f") != 0);
#else
  CHECK_INT(primc_cpu_zmm_fmas(), 0);
#endif
  /* with AVX-512 or AVX2, the direct lanes conv takes the 3x3s that Winograd does not and the strided 1x1s (but
   * on Intel and AVX2, below), but not a stem of 3 channels (but on Intel and AVX2) */
  int avx2 = primc_cpu_zmm_fmas() <= 0 && primc_sgemm_isa() == PRIMC_ISA_AVX2;
  int lanes = primc_cpu_zmm_fmas() > 0 || avx2;
  primc_conv2d stem = {1, 3, 224, 224, 64, 7, 7, 1, 2, 2, 1, 1, 3, 3, 3, 3, 0, 0, 0, 0, 0, 0, 0};
  primc_conv2d down = {1, 64, 56, 56, 128, 1, 1, 1, 2, 2, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0};
  int amd2 = primc_cpu_zmm_fmas() == 2 && primc_gm_amd_family() != 0;
  CHECK_INT(primc_conv2d_weight_layout(&mid), primc_cpu_zmm_fmas() > 0 ? PRIMC_CONV_W_WINOGRAD
                                              : lanes                   ? PRIMC_CONV_W_LANES
                                                                        : PRIMC_CONV_W_STRIPS);
  /* but 64 channels at 28x28 (196 tiles) in the lanes on Intel's two-FMA cores */
  primc_conv2d mid28 = {1, 64, 28, 28, 64, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0};
  if (primc_cpu_zmm_fmas() == 2 && !amd2)
    CHECK_INT(primc_conv2d_weight_layout(&mid28), PRIMC_CONV_W_LANES);
  CHECK_INT(primc_conv2d_weight_layout(&big), PRIMC_CONV_W_WINOGRAD);
  CHECK_INT(primc_conv2d_weight_layout(&strided), lanes ? PRIMC_CONV_W_LANES : PRIMC_CONV_W_STRIPS);
  /* Intel's two-FMA cores and AVX2: strided 1x1s as GEMMs, 3-channel stems in the lanes (AMD's two-FMA cores too);
   * Intel's also narrowing 1x1s as GEMMs (below) */
  int intel = strstr(primc_conv_tuning_name(), "(Intel)") != NULL, dl1 = primc_cpu_zmm_fmas() > 0 && !intel;
  /* 16 tiles: Winograd would read 16/9 the weights, and pays for them on Intel's two-FMA cores alone */
  CHECK_INT(primc_conv2d_weight_layout(&small), intel ? PRIMC_CONV_W_WINOGRAD : lanes ? PRIMC_CONV_W_LANES : PRIMC_CONV_W_PANELS);
  CHECK_INT(intel, primc_cpu_zmm_fmas() == 2 && primc_gm_amd_family() == 0);
  CHECK_INT(avx2, strcmp(primc_conv_tuning_name(), "AVX2") == 0);
  CHECK_INT(primc_conv2d_weight_layout(&down), dl1 ? PRIMC_CONV_W_LANES : PRIMC_CONV_W_STRIPS);
  CHECK_INT(primc_conv2d_weight_layout(&stem), intel || avx2 || amd2 ? PRIMC_CONV_W_LANES : PRIMC_CONV_W_STRIPS);
  /* ymm's 8 lanes fill a 7x7 map's 49 pixels well: the GEMM reading x in place */
  CHECK_INT(primc_conv2d_weight_layout(&pw_small), avx2 ? PRIMC_CONV_W_STRIPS : PRIMC_CONV_W_PANELS);
  /* a 1x1 widening, onto a large map or not: the GEMM reading x in place (on AVX2 too: 3x faster than the lanes
   * for this one on Zen 3) */
  primc_conv2d widen_big = {1, 16, 112, 112, 96, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0};
  primc_conv2d widen_14 = {1, 64, 14, 14, 384, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0};
  CHECK_INT(primc_conv2d_weight_layout(&widen_big), PRIMC_CONV_W_STRIPS);
  CHECK_INT(primc_conv2d_weight_layout(&widen_14), PRIMC_CONV_W_STRIPS);
  /* narrowing 4x or more, but not into 97-128 channels: the direct lanes conv where there is AVX-512,
   * except on Intel's cores, where the GEMMs are faster: the transposed one on maps of 16x16 and below, the one
   * reading x in place on larger ones (MobileNetV2's 192 -> 32 at 28x28, ResNet-50's 256 -> 64 at 56x56); on AVX2
   * the GEMM reading x in place but on maps of 7x7 and below; without either the transposed GEMM into few channels
   * at any map size */
  primc_conv2d narrow_deep = {1, 1024, 14, 14, 256, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0};
  primc_conv2d narrow_big = {1, 256, 56, 56, 64, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0};
  primc_conv2d narrow_14 = {1, 384, 14, 14, 64, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0};
  CHECK_INT(primc_conv2d_weight_layout(&narrow), dl1           ? PRIMC_CONV_W_LANES
                                                 : avx2 || intel ? PRIMC_CONV_W_STRIPS
                                                                 : PRIMC_CONV_W_PANELS);
  CHECK_INT(primc_conv2d_weight_layout(&narrow_14), dl1 ? PRIMC_CONV_W_LANES : avx2 ? PRIMC_CONV_W_STRIPS : PRIMC_CONV_W_PANELS);
  CHECK_INT(primc_conv2d_weight_layout(&narrow_deep), dl1 ? PRIMC_CONV_W_LANES : PRIMC_CONV_W_STRIPS);
  CHECK_INT(primc_conv2d_weight_layout(&narrow_big), intel || avx2 ? PRIMC_CONV_W_STRIPS
                                                    : dl1          ? PRIMC_CONV_W_LANES
                                                                   : PRIMC_CONV_W_PANELS);
  CHECK_INT(primc_conv2d_weight_layout(&narrow_wide), PRIMC_CONV_W_STRIPS);
  CHECK_INT(primc_conv2d_weight_layout(&narrow_many), PRIMC_CONV_W_STRIPS);
  CHECK_INT(primc_conv2d_weight_layout(&dw), PRIMC_CONV_W_PLAIN);
  CHECK(primc_conv2d_scratch_floats(&pw_small) >= 512 * 49 + 49 * 2048);
}

/* a small conv (1x1, or a 3-channel stem) then depthwise conv pair run as one, against the
 * double-precision reference of the two convs with their epilogues; where this CPU cannot run the
 * pair (neither AVX-512 nor AVX2) so it says PRIMC_ERR_ARG */
typedef struct then_dw_case {
  int64_t n, k, c, h, w;
  int64_t fk, fs, fp; /* the first conv's kernel, stride and padding */
  int64_t kk, stride, pad;
  int silu, res;
} then_dw_case;

static double clampd(double v, double lo, double hi) { return v < lo ? lo : v > hi ? hi : v; }

static int check_then_dw(then_dw_case t) {
  primc_conv2d pw = {t.n, t.k, t.h, t.w, t.c, t.fk, t.fk, 1, t.fs, t.fs, 1, 1, t.fp, t.fp, t.fp, t.fp, 0, 0, 0, 0, 0, 0, 0};
  int64_t mh, mw, oh, ow;
  primc_conv2d_out_hw(&pw, &mh, &mw);
  primc_conv2d dw = {t.n, t.c, mh, mw, t.c, t.kk, t.kk, t.c, t.stride, t.stride, 1, 1, t.pad, t.pad, t.pad, t.pad,
                     0, 0, 0, 0, 0, 0, 0};
  primc_conv2d_out_hw(&dw, &oh, &ow);
  int64_t nx = t.n * t.k * t.h * t.w, nm = t.n * t.c * mh * mw, ny = t.n * t.c * oh * ow, nw1 = t.c * t.k * t.fk * t.fk;
  float *x = rand_buf(nx), *w1 = rand_buf(nw1), *b1 = rand_buf(t.c), *w2 = rand_buf(t.c * t.kk * t.kk);
  float *b2 = rand_buf(t.c), *res = rand_buf(ny), *y = rand_buf(ny), *mid = malloc(sizeof(float) * (size_t)nm);
  double *m = malloc(sizeof(double) * (size_t)nm), *r = malloc(sizeof(double) * (size_t)ny);
  conv_ref(&pw, x, w1, b1, m);
  for (int64_t i = 0; i < nm; i++) {
    double v = t.silu ? m[i] / (1.0 + exp(-m[i])) : m[i];
    mid[i] = (float)clampd(v, -0.75, 0.9);
  }
  conv_ref(&dw, mid, w2, b2, r);
  primc_conv_epi e1 = {.bias = b1, .bias_stride = 1, .lo = -0.75f, .hi = 0.9f, .act = t.silu};
  primc_conv_epi e2 = {.bias = b2, .bias_stride = 1, .res = t.res ? res : NULL, .lo = -0.5f, .hi = 0.6f};
  int st = primc_conv2d_then_dw_f32(&pw, x, w1, &e1, &dw, w2, &e2, y), ok = 1;
  int here = primc_isa_covers(primc_sgemm_isa(), PRIMC_ISA_AVX2); /* the AVX-512 or the AVX2 code */
  if (!here) {
    ok = CHECK_INT(st, PRIMC_ERR_ARG);
  } else if (CHECK_INT(st, PRIMC_OK)) {
    double tol = 8.0 * (double)(t.k * t.fk * t.fk + t.kk * t.kk + 4) * FLT_EPSILON;
    for (int64_t i = 0; i < ny && ok; i++) {
      double want = clampd(r[i] + (t.res ? res[i] : 0.0), -0.5, 0.6);
      ok = CHECK_MSG(fabs(y[i] - want) <= tol, "pair k=%lld %lldx%lld/%lld c=%lld %lldx%lld, %lldx%lld/%lld: y[%lld]=%g, want %g",
                     (long long)t.k, (long long)t.fk, (long long)t.fk, (long long)t.fs, (long long)t.c, (long long)t.h,
                     (long long)t.w, (long long)t.kk, (long long)t.kk, (long long)t.stride, (long long)i, y[i], want);
    }
  } else {
    ok = 0;
  }
  free(x), free(w1), free(b1), free(w2), free(b2), free(res), free(y), free(mid), free(m), free(r);
  return ok;
}

PC_TEST(gemm_conv2d_small_conv_depthwise_pair) {
  static const then_dw_case cases[] = {
      /* n k  c   h   w  fk fs fp kk s pad silu res */
      {1, 16, 96, 30, 28, 1, 1, 0, 3, 2, 1, 0, 0},  /* MobileNetV2's widening then 3x3/2 */
      {1, 24, 40, 17, 19, 1, 1, 0, 3, 1, 1, 0, 1},  /* stride 1, 16 + 16 + 8 channels, a residual */
      {2, 5, 20, 9, 70, 1, 1, 0, 5, 2, 2, 1, 0},    /* two images, 5x5/2, SiLU, 35 wide */
      {1, 3, 16, 40, 12, 1, 1, 0, 3, 2, 0, 0, 1},   /* no padding, odd rows */
      {1, 8, 33, 7, 7, 1, 1, 0, 3, 1, 1, 1, 1},     /* a 7x7 map in one band */
      {1, 3, 32, 46, 42, 3, 2, 1, 3, 1, 1, 0, 0},   /* MobileNetV2's 3x3/2 stem then 3x3/1 */
      {1, 3, 20, 21, 37, 3, 2, 1, 3, 2, 1, 1, 0},   /* odd sizes: the stem's last column reads padding */
      {2, 2, 17, 11, 30, 5, 1, 2, 3, 1, 1, 0, 1},   /* 5x5/1 first conv, 20 border columns a row */
      {1, 4, 16, 12, 13, 3, 1, 0, 3, 2, 1, 0, 0},   /* first conv unpadded */
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
    if (!check_then_dw(cases[i])) return;
  /* not such a pair: a grouped first conv, a depthwise conv of other channels, too many taps x channels */
  primc_conv2d grouped = {1, 4, 8, 8, 16, 1, 1, 2, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0};
  primc_conv2d pw = {1, 4, 8, 8, 16, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0};
  primc_conv2d big = {1, 64, 8, 8, 16, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0};
  primc_conv2d dw = {1, 16, 8, 8, 16, 3, 3, 16, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0}, dw8 = dw;
  dw8.c = dw8.o = dw8.groups = 8;
  float buf[4096] = {0};
  CHECK_INT(primc_conv2d_then_dw_f32(&grouped, buf, buf, NULL, &dw, buf, NULL, buf + 2048), PRIMC_ERR_ARG);
  CHECK_INT(primc_conv2d_then_dw_f32(&pw, buf, buf, NULL, &dw8, buf, NULL, buf + 2048), PRIMC_ERR_ARG);
  CHECK_INT(primc_conv2d_then_dw_f32(&big, buf, buf, NULL, &dw, buf, NULL, buf + 2048), PRIMC_ERR_ARG);
  CHECK_INT(primc_conv2d_then_dw_f32(&pw, buf, buf, NULL, &dw, buf, NULL, buf + 100), PRIMC_ERR_ARG); /* y over x */
  primc_conv_epi in_place = {.res = buf + 2048, .lo = -INFINITY, .hi = INFINITY}; /* the residual in y's place */
  CHECK_INT(primc_conv2d_then_dw_f32(&pw, buf, buf, NULL, &dw, buf, &in_place, buf + 2048), PRIMC_ERR_ARG);
  CHECK_INT(primc_conv2d_then_dw_pays(&grouped, &dw), 0);
}

PC_TEST(gemm_conv2d_rejects_bad_params) {
  primc_conv2d p = {1, 6, 8, 8, 9, 3, 3, 4, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0}; /* 6 channels, 4 groups */
  float x[1] = {0}, w[1] = {0}, y[1] = {0};
  CHECK_INT(primc_conv2d_f32(&p, x, w, NULL, y), PRIMC_ERR_ARG);
  primc_conv2d q = {1, 2, 2, 2, 2, 5, 5, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}; /* kernel larger than input */
  CHECK_INT(primc_conv2d_f32(&q, x, w, NULL, y), PRIMC_ERR_ARG);
}

/* y = clamp(conv + bias + res, 0, 6), or clamp(silu(conv + bias + res), -0.25, 6), with res separate, and
 * in place (res == y, sums in the spare) */
/* layout: plain weights, or packed for the direct lanes conv (AVX-512) or as the transposed GEMM's W^T
 * panels (one group), both of which apply the epilogue as they turn C^T back */
static int check_conv_epilogue(const primc_conv2d *p, int silu, int layout) {
  int64_t oh, ow;
  primc_conv2d_out_hw(p, &oh, &ow);
  int64_t nx = p->n * p->c * p->h * p->w, nw = p->o * (p->c / p->groups) * p->kh * p->kw, ny = p->n * p->o * oh * ow;
  float *x = rand_buf(nx), *w = rand_buf(nw), *b = rand_buf(2 * p->o), *res = rand_buf(ny), *y = rand_buf(ny);
  int64_t kk = (p->c / p->groups) * p->kh * p->kw, P = oh * ow; /* the transposed GEMM's im2col and C^T */
  float *spare = rand_buf(ny), *col = rand_buf(primc_conv2d_scratch_floats(p) + kk * P + P * p->o + 1);
  double *r = malloc(sizeof(double) * (size_t)ny);
  float *bias = malloc(sizeof(float) * (size_t)p->o);
  for (int64_t o = 0; o < p->o; o++) bias[o] = b[2 * o]; /* the kernel reads it with stride 2 */
  primc_conv2d q = *p;
  q.relu = 0;
  conv_ref(&q, x, w, bias, r);
  double lo = silu ? -0.25 : 0.0;
  for (int64_t i = 0; i < ny; i++) {
    double v = r[i] + res[i];
    r[i] = fmin(fmax(silu ? v / (1.0 + exp(-v)) : v, lo), 6.0);
  }
  primc_conv_epi e = {.bias = b, .bias_stride = 2, .res = res, .lo = (float)lo, .hi = 6.0f, .act = silu};
  primc_conv2d pk = *p;
  int packed = layout != PRIMC_CONV_W_PLAIN;
  float *wl = packed ? aligned_alloc(64, (primc_conv2d_packed_weight_bytes(p, layout) + 63) / 64 * 64) : NULL;
  const float *wk = packed ? wl : w;
  if (layout == PRIMC_CONV_W_LANES) {
    pk.w_lanes = 1;
    CHECK_INT(primc_conv2d_pack_lanes(p, w, wl), PRIMC_OK);
  } else if (layout == PRIMC_CONV_W_PANELS) {
    pk.w_packed_panels = 1;
    CHECK_INT(primc_sgemm_pack_b(1, p->o, kk, w, kk, wl), PRIMC_OK);
  }
  int ok = CHECK_INT(primc_conv2d_f32_epi(&pk, x, wk, &e, y, NULL, packed ? col : NULL), PRIMC_OK);
  double tol = 4.0 * (double)(kk + 3) * FLT_EPSILON;
  for (int64_t i = 0; i < ny && ok; i++) ok = CHECK_MSG(fabs(y[i] - r[i]) <= tol, "y[%lld]=%g, want %g", (long long)i, y[i], r[i]);
  memcpy(y, res, sizeof(float) * (size_t)ny);
  e.res = y;
  ok = ok && CHECK_INT(primc_conv2d_f32_epi(&pk, x, wk, &e, y, NULL, packed ? col : NULL), PRIMC_ERR_ARG); /* in place needs a spare */
  ok = ok && CHECK_INT(primc_conv2d_f32_epi(&pk, x, wk, &e, y, spare, col), PRIMC_OK);
  for (int64_t i = 0; i < ny && ok; i++)
    ok = CHECK_MSG(fabs(y[i] - r[i]) <= tol, "in place: y[%lld]=%g, want %g", (long long)i, y[i], r[i]);
  free(x), free(w), free(b), free(res), free(y), free(spare), free(col), free(r), free(bias), free(wl);
  return ok;
}

/* weights packed from the conv whose input gradient p is (a training step's flip read in place, codegen/kir_flip.c)
 * are the bytes packed from the flipped weights: the lanes layout with partial blocks of 32 channels, kernels of 1,
 * 9, 25 (past one 16-tap transpose) and 49 taps and one split over the threads, Winograd's at two tile heights
 * with a partial strip and block of 32 channels; on each ISA. Other layouts are refused. */
PC_TEST(gemm_conv2d_pack_flipped) {
  static const struct {
    int64_t o, c, k;
    int layout, mr;
  } cases[] = {{40, 5, 3, PRIMC_CONV_W_LANES, 0},     {64, 3, 5, PRIMC_CONV_W_LANES, 0},
               {17, 2, 7, PRIMC_CONV_W_LANES, 0},     {33, 4, 1, PRIMC_CONV_W_LANES, 0},
               {128, 64, 3, PRIMC_CONV_W_LANES, 0},   {40, 37, 3, PRIMC_CONV_W_WINOGRAD, 14},
               {64, 48, 3, PRIMC_CONV_W_WINOGRAD, 6}, {20, 8, 3, PRIMC_CONV_W_STRIPS, 6}};
  int is[4], n = isas(is);
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    int64_t O = cases[c].o, C = cases[c].c, K = cases[c].k, T = K * K, pad = K / 2;
    primc_conv2d p = {1, C, 9, 9, O, K, K, 1, 1, 1, 1, 1, pad, pad, pad, pad, 0, 0, 0, 0, 0, 0, 0};
    primc_conv_plan plan = {0, cases[c].layout, cases[c].mr};
    float *wf = rand_buf(O * C * T), *w = malloc(sizeof(float) * (size_t)(O * C * T));
    for (int64_t o = 0; o < O; o++)
      for (int64_t ch = 0; ch < C; ch++)
        for (int64_t t = 0; t < T; t++) w[(o * C + ch) * T + t] = wf[(ch * O + o) * T + T - 1 - t];
    size_t bytes = primc_conv_plan_weight_bytes(&p, &plan);
    float *want = aligned_alloc(64, (bytes + 63) / 64 * 64), *got = aligned_alloc(64, (bytes + 63) / 64 * 64);
    int refused = cases[c].layout == PRIMC_CONV_W_STRIPS;
    int ok = !refused || CHECK_INT(primc_conv_plan_pack_flipped(&p, &plan, wf, got), PRIMC_ERR_ARG);
    for (int i = 0; i < n && ok && !refused; i++) {
      primc_sgemm_force_isa(is[i]);
      memset(got, 0xff, bytes);
      ok = CHECK_INT(primc_conv_plan_pack(&p, &plan, w, want), PRIMC_OK) &&
           CHECK_INT(primc_conv_plan_pack_flipped(&p, &plan, wf, got), PRIMC_OK) &&
           CHECK_MSG(!memcmp(want, got, bytes), "%lld -> %lld %lldx%lld, layout %d, ISA %d: packed bytes differ",
                     (long long)C, (long long)O, (long long)K, (long long)K, cases[c].layout, is[i]);
      primc_sgemm_force_isa(PRIMC_ISA_AUTO);
    }
    ok = ok && CHECK_INT(primc_conv_plan_pack_flipped(&p, &plan, NULL, got), PRIMC_ERR_ARG);
    free(wf), free(w), free(want), free(got);
    if (!ok) return;
  }
}

PC_TEST(gemm_conv2d_fused_epilogue) {
  static const primc_conv2d cases[] = {
      {1, 8, 9, 11, 8, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0},   /* implicit im2col */
      {1, 16, 7, 5, 24, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0},  /* 1x1 */
      {1, 6, 9, 40, 6, 3, 3, 6, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0},   /* depthwise */
      {1, 5, 13, 37, 7, 3, 3, 1, 2, 2, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0},  /* stride 2: im2col rows of two vectors */
      {1, 3, 30, 41, 4, 7, 7, 1, 2, 2, 1, 1, 3, 3, 3, 3, 0, 0, 0, 0, 0, 0, 0},  /* 7x7 stride 2 stem */
      {1, 4, 9, 13, 5, 3, 3, 1, 2, 2, 2, 1, 2, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0},   /* stride 2, dilation: gathered im2col */
      {1, 7, 7, 7, 7, 5, 5, 7, 1, 1, 1, 1, 2, 2, 2, 2, 0, 0, 0, 0, 0, 0, 0},   /* depthwise 7x7 plane, 5x5 */
      {1, 5, 14, 14, 5, 5, 5, 5, 2, 2, 1, 1, 2, 2, 2, 2, 0, 0, 0, 0, 0, 0, 0},  /* depthwise 5x5 stride 2, split columns */
      {1, 20, 14, 14, 20, 3, 3, 20, 2, 2, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0}, /* depthwise stride 2, channels in lanes */
  };
  int is[4], n = isas(is);
  for (int i = 0; i < n; i++)
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
      primc_sgemm_force_isa(is[i]);
      int ok = check_conv_epilogue(&cases[c], 0, PRIMC_CONV_W_PLAIN) && check_conv_epilogue(&cases[c], 1, PRIMC_CONV_W_PLAIN);
      primc_sgemm_force_isa(PRIMC_ISA_AUTO);
      if (!ok) return;
    }
  /* C^T turned back with the epilogue, by the direct lanes conv (AVX-512) and the transposed GEMM (any
   * ISA): two images, a partial block of 16 channels, stride 2, a stem's 7x7/2 */
  static const primc_conv2d lanes[] = {
      {2, 16, 9, 20, 40, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0},
      {1, 9, 15, 30, 64, 3, 3, 1, 2, 2, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0},
      {1, 3, 30, 41, 32, 7, 7, 1, 2, 2, 1, 1, 3, 3, 3, 3, 0, 0, 0, 0, 0, 0, 0},
  };
  for (int i = 0; i < n; i++)
    for (size_t c = 0; c < sizeof lanes / sizeof lanes[0]; c++) {
      primc_sgemm_force_isa(is[i]);
      int ok = check_conv_epilogue(&lanes[c], 0, PRIMC_CONV_W_PANELS) && check_conv_epilogue(&lanes[c], 1, PRIMC_CONV_W_PANELS) &&
               (is[i] != PRIMC_ISA_AVX512 ||
                (check_conv_epilogue(&lanes[c], 0, PRIMC_CONV_W_LANES) && check_conv_epilogue(&lanes[c], 1, PRIMC_CONV_W_LANES)));
      primc_sgemm_force_isa(PRIMC_ISA_AUTO);
      if (!ok) return;
    }
}

/* primc_k_maxpool (the call codegen makes of ONNX MaxPool's pad + max tree) against a plain loop
 * over the -inf padded window: the 3x3/2 fast path with edges on both sides, a NaN that must win,
 * and a 2x2/1 shape through the row-buffer path */
static void maxpool_case_ceil(int64_t C, int64_t H, int64_t W, int64_t k, int64_t s, int64_t pt, int64_t pl, int nan_at,
                              int ceil_mode) {
  int64_t OH = (H + 2 * pt - k + (ceil_mode ? s - 1 : 0)) / s + 1, OW = (W + 2 * pl - k + (ceil_mode ? s - 1 : 0)) / s + 1;
  int64_t q[11] = {C, H, W, OH, OW, k, k, s, s, pt, pl};
  float *x = malloc(sizeof(float) * (size_t)(C * H * W)), *y = malloc(sizeof(float) * (size_t)(C * OH * OW));
  for (int64_t i = 0; i < C * H * W; i++) x[i] = (float)((i * 7919) % 1000) - 500.0f;
  if (nan_at >= 0) x[nan_at] = NAN;
  void *b[2] = {y, x};
  CHECK(primc_k_maxpool(q, b) == PRIMC_OK);
  int bad = 0;
  for (int64_t c = 0; c < C; c++)
    for (int64_t oy = 0; oy < OH; oy++)
      for (int64_t ox = 0; ox < OW; ox++) {
        double m = -INFINITY;
        int nan = 0;
        for (int64_t dy = 0; dy < k; dy++)
          for (int64_t dx = 0; dx < k; dx++) {
            int64_t iy = oy * s - pt + dy, ix = ox * s - pl + dx;
            if (iy < 0 || iy >= H || ix < 0 || ix >= W) continue;
            double v = x[(c * H + iy) * W + ix];
            if (isnan(v)) nan = 1;
            else if (v > m) m = v;
          }
        double got = y[(c * OH + oy) * OW + ox];
        bad += nan ? !isnan(got) : got != m;
      }
  CHECK_MSG(bad == 0, "max pool %lldx%lld/%lld of %lldx%lld (pads %lld, %lld%s): %d outputs wrong", (long long)k, (long long)k,
            (long long)s, (long long)H, (long long)W, (long long)pt, (long long)pl, ceil_mode ? ", ceil" : "", bad);
  free(x);
  free(y);
}

static void maxpool_case(int64_t C, int64_t H, int64_t W, int64_t k, int64_t s, int64_t pt, int64_t pl, int nan_at) {
  maxpool_case_ceil(C, H, W, k, s, pt, pl, nan_at, 0);
}

PC_TEST(maxpool_call) {
  maxpool_case(3, 112, 112, 3, 2, 1, 1, -1);
  maxpool_case(2, 37, 41, 3, 2, 1, 1, 5 * 41 + 7);
  maxpool_case(2, 9, 30, 3, 2, 0, 0, 3 * 30 + 29);
  maxpool_case(2, 10, 11, 2, 1, 1, 1, 12);
  maxpool_case(3, 32, 32, 3, 2, 1, 1, 2 * 32 * 32 + 17 * 32 + 9); /* resnet_tiny's stem pool */
  maxpool_case(2, 13, 29, 3, 1, 1, 1, 6 * 29 + 28);                /* stride 1, a NaN in the last column */
  maxpool_case(2, 7, 5, 2, 2, 0, 0, -1);                           /* rows narrower than a vector */
  maxpool_case(2, 19, 40, 5, 3, 2, 2, 40 + 3);                     /* stride 3: the scalar windows */
  /* ceil mode (SqueezeNet's pools): the last windows reach past the map's right and bottom edges */
  maxpool_case_ceil(2, 28, 28, 3, 2, 0, 0, 27 * 28 + 27, 1);
  maxpool_case_ceil(2, 56, 45, 3, 2, 0, 0, 30 * 45 + 16, 1);
  maxpool_case_ceil(2, 9, 9, 3, 2, 0, 0, 8, 1);  /* 5 outputs a row: fewer than a vector */
  maxpool_case_ceil(2, 20, 21, 3, 2, 1, 1, 20, 1);
  maxpool_case_ceil(2, 111, 111, 3, 2, 0, 0, 40 * 111 + 32, 1); /* SqueezeNet's: a NaN in a block's carried column */
  maxpool_case(2, 12, 66, 3, 2, 0, 0, 5 * 66 + 65);             /* floor mode, the last column unread */
}

/* primc_k_maxpool_u8 (a QDQ model's pool on its u8 values, the map padded with 0) against a plain loop, with and
 * without the dequantized f32 copy, on each row the CPU has (AVX512-BW, AVX2) and the plain C loops */
static void maxpool_u8_case(int64_t C, int64_t H, int64_t W, int64_t k, int64_t s, int64_t pt, int64_t pl, int with_f32) {
  int64_t OH = (H + 2 * pt - k) / s + 1, OW = (W + 2 * pl - k) / s + 1;
  float scale = 0.0112813f;
  uint32_t bits;
  memcpy(&bits, &scale, sizeof bits);
  int64_t q[13] = {C, H, W, OH, OW, k, k, s, s, pt, pl, with_f32, bits};
  uint8_t *x = malloc((size_t)(C * H * W)), *y = malloc((size_t)(C * OH * OW));
  float *yf = malloc(sizeof(float) * (size_t)(C * OH * OW));
  for (int64_t i = 0; i < C * H * W; i++) x[i] = (uint8_t)((i * 7919) % 251);
  for (int level = 0; level < 3; level++) {
    primc_maxpool_u8_force(level);
    memset(y, 0xAA, (size_t)(C * OH * OW));
    void *b[3] = {y, x, yf};
    CHECK(primc_k_maxpool_u8(q, b) == PRIMC_OK);
    int bad = 0, spread = 0;
    for (int64_t c = 0; c < C; c++)
      for (int64_t oy = 0; oy < OH; oy++)
        for (int64_t ox = 0; ox < OW; ox++) {
          int m = 0; /* the pad's value */
          for (int64_t dy = 0; dy < k; dy++)
            for (int64_t dx = 0; dx < k; dx++) {
              int64_t iy = oy * s - pt + dy, ix = ox * s - pl + dx;
              if (iy >= 0 && iy < H && ix >= 0 && ix < W && x[(c * H + iy) * W + ix] > m) m = x[(c * H + iy) * W + ix];
            }
          int64_t at = (c * OH + oy) * OW + ox;
          bad += y[at] != m || (with_f32 && yf[at] != (float)m * scale);
          spread += m != y[0];
        }
    CHECK_MSG(bad == 0 && spread > 0, "u8 max pool %lldx%lld/%lld of %lldx%lld (pads %lld, %lld)%s%s: %d outputs wrong",
              (long long)k, (long long)k, (long long)s, (long long)H, (long long)W, (long long)pt, (long long)pl,
              with_f32 ? ", with f32" : "", level == 2 ? ", plain C" : level == 1 ? ", AVX2 at most" : "", bad);
  }
  primc_maxpool_u8_force(0);
  free(x), free(y), free(yf);
}

PC_TEST(maxpool_u8_call) {
  maxpool_u8_case(3, 112, 112, 3, 2, 1, 1, 1); /* ResNet's stem pool: 56 outputs, 32 + 24 */
  maxpool_u8_case(2, 37, 41, 3, 2, 1, 1, 0);
  maxpool_u8_case(2, 9, 130, 3, 2, 0, 0, 1);   /* rows past 64 bytes */
  maxpool_u8_case(2, 10, 11, 2, 1, 1, 1, 1);   /* 2x2/1: the plain windows */
  maxpool_u8_case(2, 19, 40, 5, 3, 2, 2, 0);   /* stride 3 */
  maxpool_u8_case(2, 29, 29, 3, 2, 1, 1, 1);   /* 15 outputs: AVX2's windows under 32 */
  maxpool_u8_case(2, 30, 30, 3, 2, 0, 0, 1);   /* a 30-byte row: AVX2's rows under 32 */
  maxpool_u8_case(2, 131, 133, 3, 2, 1, 1, 1); /* 67 outputs: two of 32 and an overlapping one */
}
