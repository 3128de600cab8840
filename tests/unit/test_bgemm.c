/* tests/unit/test_bgemm.c: the bf16 GEMM (runtime/gemm/bgemm*.c), every row the CPU runs, against a long double
 * reference on operands rounded to bf16 by frexp/ldexp (not the runtime's bit trick), on shapes around the
 * 32 x 32 tiles, the 32-deep k steps and the 512-deep K blocks, every transpose, both splits. */
#include "runtime/primc_rt.h"
#include "tests/test.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static void fill(float *p, int64_t n, uint32_t seed) {
  for (int64_t i = 0; i < n; i++) {
    seed = seed * 1664525u + 1013904223u;
    p[i] = (float)((double)(seed >> 8) / (double)(1u << 23) - 1.0);
  }
}

/* x to 8 significant bits, ties to even: the bf16 value (no bf16 here overflows or is subnormal) */
static double to_bf16(double x) {
  int e;
  double m = frexp(x, &e); /* x = m 2^e, 0.5 <= |m| < 1 */
  return ldexp(nearbyint(ldexp(m, 8)), e - 8);
}

typedef struct err {
  double worst; /* max |got - want| / sum |a b|, want from rounded operands (split 1) or exact ones (split 3) */
  int failed;
} err;

static err check_one(int64_t M, int64_t N, int64_t K, int ta, int tb, int split, int prepack) {
  int64_t lda = (ta ? M : K) + 3, ldb = (tb ? K : N) + 2, ldc = N + 5;
  float *a = malloc(sizeof(float) * (size_t)((ta ? K : M) * lda + 1));
  float *b = malloc(sizeof(float) * (size_t)((tb ? N : K) * ldb + 1));
  float *c = malloc(sizeof(float) * (size_t)(M * ldc + 1));
  fill(a, (ta ? K : M) * lda, (uint32_t)(M * 131 + K));
  fill(b, (tb ? N : K) * ldb, (uint32_t)(N * 137 + K));
  fill(c, M * ldc, 7); /* C's old values must not leak in */
  float *c0 = malloc(sizeof(float) * (size_t)(M * ldc + 1));
  memcpy(c0, c, sizeof(float) * (size_t)(M * ldc));
  err r = {0, 0};
  if (prepack) {
    size_t sz = primc_bgemm_packed_b_size(N, K, split);
    void *p = aligned_alloc(64, (sz + 63) / 64 * 64);
    r.failed = !p || primc_bgemm_pack_b(tb, N, K, b, ldb, split, p) != PRIMC_OK ||
               primc_bgemm_packed_check(p, sz, N, K, split) != PRIMC_OK ||
               primc_bgemm_prepacked(ta, M, N, K, a, lda, p, c, ldc) != PRIMC_OK;
    free(p);
  } else {
    r.failed = primc_bgemm(ta, tb, M, N, K, a, lda, b, ldb, split, c, ldc) != PRIMC_OK;
  }
  for (int64_t m = 0; m < M && !r.failed; m++)
    for (int64_t n = 0; n < N; n++) {
      long double want = 0, mag = 0;
      for (int64_t k = 0; k < K; k++) {
        double x = ta ? a[k * lda + m] : a[m * lda + k], y = tb ? b[n * ldb + k] : b[k * ldb + n];
        if (split == 1) x = to_bf16(x), y = to_bf16(y);
        want += (long double)x * y;
        mag += fabsl((long double)x * y);
      }
      double e = (double)(fabsl((long double)c[m * ldc + n] - want) / (mag > 0 ? mag : 1));
      if (e > r.worst) r.worst = e;
    }
  for (int64_t m = 0; m < M && !r.failed; m++) /* the padding between rows is untouched */
    for (int64_t n = N; n < ldc; n++)
      if (memcmp(&c[m * ldc + n], &c0[m * ldc + n], sizeof *c)) r.failed = 1;
  free(a);
  free(b);
  free(c);
  free(c0);
  return r;
}

static const int64_t shapes[][3] = {{1, 1, 1},    {16, 16, 32},  {32, 32, 32},  {33, 17, 31}, {5, 40, 3},
                                    {64, 96, 600}, {31, 33, 513}, {70, 50, 64}, {1, 200, 100}, {300, 20, 1030},
                                    {40, 300, 301}}; /* the last: B packed over the pool (N K >= 2^16), K odd */

PC_TEST(bgemm_rows_match_reference) {
  int ran = 0;
  for (int row = 0; row < PRIMC_BGEMM_ROW_COUNT; row++) {
    if (primc_bgemm_force_row(row) < 0) continue; /* the CPU lacks it */
    ran++;
    for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++)
      for (int t = 0; t < 4; t++)
        for (int split = 1; split <= 3; split += 2) {
          int64_t M = shapes[s][0], N = shapes[s][1], K = shapes[s][2];
          err e = check_one(M, N, K, t & 1, t >> 1, split, (int)(s + t) % 2);
          /* split 1: only the f32 sums' rounding; split 3: the dropped lo * lo term, 2^-16 of each product */
          double tol = split == 1 ? 1e-5 : 4e-5;
          CHECK_MSG(!e.failed && e.worst <= tol, "row %s %lldx%lldx%lld ta=%d tb=%d split %d: error %g%s",
                    primc_bgemm_row_name(row), (long long)M, (long long)N, (long long)K, t & 1, t >> 1, split,
                    e.worst, e.failed ? " (call failed)" : "");
        }
  }
  primc_bgemm_force_row(-1);
  CHECK(ran >= 1); /* the portable row runs anywhere */
}

/* split 3 exists to be near f32: against the exact product it must beat split 1 by orders of magnitude */
PC_TEST(bgemm_split3_is_near_f32) {
  err e1 = check_one(40, 40, 256, 0, 0, 1, 1), e3 = check_one(40, 40, 256, 0, 0, 3, 1);
  /* e1 as measured against rounded operands is small; measure split 1 against the exact product instead */
  int64_t M = 40, N = 40, K = 256;
  float *a = malloc(sizeof(float) * M * K), *b = malloc(sizeof(float) * K * N), *c = malloc(sizeof(float) * M * N);
  fill(a, M * K, 11);
  fill(b, K * N, 13);
  CHECK(primc_bgemm(0, 0, M, N, K, a, K, b, N, 1, c, N) == PRIMC_OK);
  double worst1 = 0;
  for (int64_t m = 0; m < M; m++)
    for (int64_t n = 0; n < N; n++) {
      long double want = 0, mag = 0;
      for (int64_t k = 0; k < K; k++) want += (long double)a[m * K + k] * b[k * N + n], mag += fabsl((long double)a[m * K + k] * b[k * N + n]);
      double r = (double)(fabsl(c[m * N + n] - want) / mag);
      if (r > worst1) worst1 = r;
    }
  CHECK(!e1.failed && !e3.failed);
  CHECK_MSG(worst1 > 1e-4 && e3.worst < worst1 / 30, "split 1 %g against exact, split 3 %g", worst1, e3.worst);
  free(a);
  free(b);
  free(c);
}

PC_TEST(bgemm_rejects_bad_packed_b) {
  float b[64 * 8], a[4 * 64], c[4 * 8];
  fill(b, 64 * 8, 3);
  fill(a, 4 * 64, 5);
  size_t sz = primc_bgemm_packed_b_size(8, 64, 1);
  CHECK(sz > 0 && primc_bgemm_packed_b_size(8, 64, 2) == 0 && primc_bgemm_packed_b_size(0, 64, 1) == 0);
  char *p = aligned_alloc(64, (sz + 63) / 64 * 64);
  CHECK(primc_bgemm_pack_b(0, 8, 64, b, 8, 1, p) == PRIMC_OK);
  CHECK(primc_bgemm_packed_check(p, sz, 8, 64, 1) == PRIMC_OK);
  CHECK(primc_bgemm_packed_check(p, sz - 1, 8, 64, 1) == PRIMC_ERR_WEIGHTS); /* truncated */
  CHECK(primc_bgemm_packed_check(p, sz, 9, 64, 1) == PRIMC_ERR_WEIGHTS);     /* another shape */
  CHECK(primc_bgemm_packed_check(p, sz, 8, 64, 3) == PRIMC_ERR_WEIGHTS);     /* another split */
  CHECK(primc_bgemm_prepacked(0, 4, 9, 64, a, 64, p, c, 9) == PRIMC_ERR_ARG);
  p[0] ^= 1;
  CHECK(primc_bgemm_packed_check(p, sz, 8, 64, 1) == PRIMC_ERR_WEIGHTS); /* bad magic */
  CHECK(primc_bgemm_prepacked(0, 4, 8, 64, a, 64, p, c, 8) == PRIMC_ERR_ARG);
  free(p);
  CHECK(primc_bgemm(0, 0, 4, 8, 64, a, 64, b, 8, 2, c, 8) == PRIMC_ERR_ARG);
  CHECK(primc_bgemm_force_row(PRIMC_BGEMM_ROW_COUNT) == -1);
  CHECK(primc_bgemm_row_name(PRIMC_BGEMM_ROW_COUNT) == NULL && primc_bgemm_row_name(PRIMC_BGEMM_ROW_GENERIC));
}

/* B's rows made by a callback, as the conv's implicit im2col makes them: here row k is b[k * ldb + n] + 1 */
static void plus_one_row(void *ctx, int64_t k, int64_t n0, int64_t nc, float *dst) {
  const float *b = ctx;
  for (int64_t n = 0; n < nc; n++) dst[n] = b[k * 101 + n0 + n] + 1.0f;
}

/* A packed once (a conv's weights) against B plain or by rows, every row the CPU runs */
PC_TEST(bgemm_packed_a_matches_reference) {
  static const int64_t sh[][3] = {{1, 1, 1}, {16, 31, 32}, {33, 100, 70}, {128, 49, 1152}, {70, 101, 300}};
  int ran = 0;
  for (int row = 0; row < PRIMC_BGEMM_ROW_COUNT; row++) {
    if (primc_bgemm_force_row(row) < 0) continue;
    ran++;
    for (size_t s = 0; s < sizeof sh / sizeof *sh; s++)
      for (int by_rows = 0; by_rows < 2; by_rows++) {
        int64_t M = sh[s][0], N = sh[s][1], K = sh[s][2], ldb = 101, lda = K + 2;
        float *a = malloc(sizeof(float) * (size_t)(M * lda)), *b = malloc(sizeof(float) * (size_t)(K * ldb));
        float *c = malloc(sizeof(float) * (size_t)(M * N));
        fill(a, M * lda, (uint32_t)(M + 3 * K));
        fill(b, K * ldb, (uint32_t)(N + 5 * K));
        size_t sz = primc_bgemm_packed_a_size(M, K);
        void *p = aligned_alloc(64, (sz + 63) / 64 * 64);
        int ok = CHECK_INT(primc_bgemm_pack_a(M, K, a, lda, p), PRIMC_OK) &&
                 CHECK_INT(primc_bgemm_packed_a_check(p, sz, M, K), PRIMC_OK) &&
                 CHECK_INT(primc_bgemm_packed_a_run(p, M, N, K, by_rows ? NULL : b, ldb, by_rows ? plus_one_row : NULL,
                                                    b, c, N),
                           PRIMC_OK);
        double worst = 0;
        for (int64_t m = 0; ok && m < M; m++)
          for (int64_t n = 0; n < N; n++) {
            long double want = 0, mag = 0;
            for (int64_t k = 0; k < K; k++) {
              long double v = (long double)to_bf16(a[m * lda + k]) * to_bf16(b[k * ldb + n] + (by_rows ? 1.0f : 0.0f));
              want += v, mag += fabsl(v);
            }
            double e = (double)(fabsl(c[m * N + n] - want) / (mag > 0 ? mag : 1));
            if (e > worst) worst = e;
          }
        CHECK_MSG(ok && worst <= 1e-5, "row %s %lldx%lldx%lld %s: error %g", primc_bgemm_row_name(row), (long long)M,
                  (long long)N, (long long)K, by_rows ? "rows" : "plain", worst);
        CHECK_INT(primc_bgemm_packed_a_check(p, sz, M + 1, K), PRIMC_ERR_WEIGHTS);
        free(a), free(b), free(c), free(p);
      }
  }
  primc_bgemm_force_row(-1);
  CHECK(ran >= 1);
}

/* small integers at the edges of what is exact: |a|, |b| <= 256, K = 256, every product +-65536 with one sign,
 * so the sum reaches 2^24; then mixed values over a ragged K; against int64 sums, exactly */
PC_TEST(bgemm_int_is_exact) {
  static const int64_t sh[][3] = {{16, 32, 256}, {33, 70, 256}, {5, 17, 3}, {64, 48, 200}};
  int ran = 0;
  for (int row = 0; row < PRIMC_BGEMM_ROW_COUNT; row++) {
    if (primc_bgemm_force_row(row) < 0) continue;
    ran++;
    for (size_t s = 0; s < sizeof sh / sizeof *sh; s++)
      for (int ta = 0; ta < 2; ta++) {
        int64_t M = sh[s][0], N = sh[s][1], K = sh[s][2];
        int32_t *a = malloc(sizeof(int32_t) * (size_t)(M * K));
        float *b = malloc(sizeof(float) * (size_t)(K * N)), *c = malloc(sizeof(float) * (size_t)(M * N));
        uint32_t seed = (uint32_t)(M * 7 + K);
        for (int64_t i = 0; i < M * K; i++) {
          seed = seed * 1664525u + 1013904223u;
          a[i] = s == 0 ? -256 : (int32_t)(seed >> 23) - 256; /* [-256, 255] */
        }
        for (int64_t i = 0; i < K * N; i++) {
          seed = seed * 1664525u + 1013904223u;
          b[i] = s == 0 ? 256.0f : (float)((int32_t)(seed >> 23) - 255); /* [-255, 256] */
        }
        size_t sz = primc_bgemm_packed_b_size(N, K, 1);
        void *p = aligned_alloc(64, (sz + 63) / 64 * 64);
        int ok = CHECK_INT(primc_bgemm_pack_b(0, N, K, b, N, 1, p), PRIMC_OK);
        /* A as stored: [M][K], or [K][M] when transposed (the same values) */
        int32_t *at = malloc(sizeof(int32_t) * (size_t)(M * K));
        for (int64_t m = 0; m < M; m++)
          for (int64_t k = 0; k < K; k++) at[ta ? k * M + m : m * K + k] = a[m * K + k];
        ok = ok && CHECK_INT(primc_bgemm_prepacked_int(ta, M, N, K, at, ta ? M : K, p, c, N), PRIMC_OK);
        int64_t bad = 0;
        for (int64_t m = 0; ok && m < M; m++)
          for (int64_t n = 0; n < N; n++) {
            int64_t want = 0;
            for (int64_t k = 0; k < K; k++) want += (int64_t)a[m * K + k] * (int64_t)b[k * N + n];
            bad += (int64_t)c[m * N + n] != want;
          }
        CHECK_MSG(ok && bad == 0, "row %s %lldx%lldx%lld ta=%d: %lld sums not exact", primc_bgemm_row_name(row),
                  (long long)M, (long long)N, (long long)K, ta, (long long)bad);
        free(a), free(b), free(c), free(p), free(at);
      }
  }
  primc_bgemm_force_row(-1);
  CHECK(ran >= 1);
  float c[1];
  static int32_t a[PRIMC_BGEMM_INT_K + 1];
  CHECK_INT(primc_bgemm_prepacked_int(0, 1, 1, PRIMC_BGEMM_INT_K + 1, a, PRIMC_BGEMM_INT_K + 1, NULL, c, 1),
            PRIMC_ERR_ARG); /* past the longest chunk */
}

/* the rounding and packing paths below AVX-512 (scalar, as a CPU without it takes them), both splits, both layouts */
PC_TEST(bgemm_rounding_without_avx512) {
  static const int64_t sh[][3] = {{33, 17, 31}, {20, 40, 300}};
  int ran = 0;
  for (int isa = PRIMC_ISA_SCALAR; isa < PRIMC_ISA_AVX512; isa++) {
    if (primc_sgemm_force_isa(isa) != 0) continue;
    ran++;
    for (size_t s = 0; s < sizeof sh / sizeof *sh; s++)
      for (int t = 0; t < 4; t++)
        for (int split = 1; split <= 3; split += 2) {
          err e = check_one(sh[s][0], sh[s][1], sh[s][2], t & 1, t >> 1, split, t % 2);
          CHECK_MSG(!e.failed && e.worst <= (split == 1 ? 1e-5 : 4e-5), "isa %d shape %zu ta=%d tb=%d split %d: %g", isa,
                    s, t & 1, t >> 1, split, e.worst);
        }
  }
  primc_sgemm_force_isa(PRIMC_ISA_AUTO);
  CHECK(ran >= 1);
}
