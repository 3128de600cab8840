/* tests/unit/test_dgemm.c: the f64 GEMM (runtime/gemm/dgemm.c) against a long double reference, on shapes around
 * its 4 x 8 tile and its K and N blocks, every transpose, padded leading dimensions, on each ISA it runs. */
#include "runtime/primc_rt.h"
#include "tests/test.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>

static void fill(double *p, int64_t n, uint32_t seed) {
  for (int64_t i = 0; i < n; i++) {
    seed = seed * 1664525u + 1013904223u;
    p[i] = (double)(seed >> 8) / (double)(1u << 23) - 1.0;
  }
}

/* the worst |got - want| / (sum |a b|) over C; -1 when a product failed */
static double check_one(int64_t M, int64_t N, int64_t K, int ta, int tb) {
  int64_t lda = (ta ? M : K) + 3, ldb = (tb ? K : N) + 2, ldc = N + 1;
  double *a = malloc(sizeof(double) * (size_t)((ta ? K : M) * lda + 1));
  double *b = malloc(sizeof(double) * (size_t)((tb ? N : K) * ldb + 1));
  double *c = malloc(sizeof(double) * (size_t)(M * ldc + 1));
  fill(a, (ta ? K : M) * lda, (uint32_t)(M * 131 + K));
  fill(b, (tb ? N : K) * ldb, (uint32_t)(N * 137 + K));
  fill(c, M * ldc, 7); /* beta is 0: what C held must not matter */
  double worst = primc_dgemm(ta, tb, M, N, K, a, lda, b, ldb, c, ldc) == PRIMC_OK ? 0 : -1;
  for (int64_t m = 0; m < M && worst >= 0; m++)
    for (int64_t n = 0; n < N; n++) {
      long double want = 0, mag = 0;
      for (int64_t k = 0; k < K; k++) {
        long double v = (long double)(ta ? a[k * lda + m] : a[m * lda + k]) * (tb ? b[n * ldb + k] : b[k * ldb + n]);
        want += v;
        mag += fabsl(v);
      }
      double e = (double)(fabsl((long double)c[m * ldc + n] - want) / (mag > 0 ? mag : 1));
      if (e > worst) worst = e;
    }
  free(a);
  free(b);
  free(c);
  return worst;
}

PC_TEST(dgemm_matches_reference_on_every_isa) {
  static const int64_t shapes[][3] = {{1, 1, 1}, {4, 8, 1},  {5, 9, 3},   {3, 7, 0},    {17, 33, 257},
                                      {64, 130, 300}, {1, 200, 64}, {130, 1, 64}, {37, 19, 513}};
  int isas[] = {PRIMC_ISA_SCALAR, PRIMC_ISA_AVX2};
  int ran = 0;
  for (size_t i = 0; i < sizeof isas / sizeof *isas; i++) {
    if (primc_sgemm_force_isa(isas[i]) < 0) continue; /* the CPU lacks it */
    ran++;
    for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++)
      for (int t = 0; t < 4; t++) {
        double e = check_one(shapes[s][0], shapes[s][1], shapes[s][2], t & 1, t >> 1);
        CHECK_MSG(e >= 0 && e <= 1e-12, "isa %d %lldx%lldx%lld ta=%d tb=%d: error %g", isas[i],
                  (long long)shapes[s][0], (long long)shapes[s][1], (long long)shapes[s][2], t & 1, t >> 1, e);
      }
  }
  primc_sgemm_force_isa(PRIMC_ISA_AUTO);
  CHECK(ran >= 1);
}
