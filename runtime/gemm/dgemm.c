/* runtime/gemm/dgemm.c: the f64 GEMM, our own so that a compiled model links no BLAS: register tiles (6 x 8
 * with AVX2 FMA, 4 x 8 in vector-extension code for any x86-64, picked with primc_sgemm_isa()) over blocks of
 * K and N that stay in cache, B read in place. f64 contractions are rare in models; this favours being small
 * and fixed in its summation order (k ascending per element, whatever the thread count). */
#include "runtime/primc_rt.h"

#include <stdlib.h>
#include <string.h>
#if defined(__x86_64__)
#include <immintrin.h>
#endif

typedef double v4d __attribute__((vector_size(32)));
typedef double v4du __attribute__((vector_size(32), aligned(8))); /* for loads and stores at any double */

#define DG_NR 8
#define DG_STRIP 12 /* rows a thread takes at a time: whole tiles of 4 and of 6 */
#define DG_KC 256 /* a 4 x KC strip of A stays in L1 */
#define DG_NC 128 /* a KC x NC block of B (256 KiB) stays in L2 */
#define DG_SPLIT_FLOPS (1 << 21)

typedef struct dg_args {
  int64_t M, N, K;
  const double *A;
  int64_t sam, sak; /* A[m][k] at A[m * sam + k * sak] */
  const double *B;
  int64_t sbk, sbn; /* B[k][n] at B[k * sbk + n * sbn] */
  double *C;
  int64_t ldc;
} dg_args;

/* The accumulators are named variables, not arrays: GCC kept an array of them in memory and stored every
 * one each k step, which halved the speed. */

/* a 4 x 8 tile for any x86-64: C[i..i+4)[j..j+8) += A[i..i+4)[k0..k0+kn) B[k0..k0+kn)[j..j+8) */
static void dg_tile_any(const dg_args *g, int64_t i, int64_t j, int64_t k0, int64_t kn, const double *b, int64_t bs) {
  v4d z = {0, 0, 0, 0}, c0 = z, d0 = z, c1 = z, d1 = z, c2 = z, d2 = z, c3 = z, d3 = z;
  const double *a = g->A + i * g->sam + k0 * g->sak;
  const int64_t s1 = g->sam, s2 = 2 * g->sam, s3 = 3 * g->sam, sk = g->sak;
  for (int64_t k = 0; k < kn; k++, a += sk, b += bs) {
    v4d b0 = *(const v4du *)b, b1 = *(const v4du *)(b + 4);
    c0 += a[0] * b0, d0 += a[0] * b1;
    c1 += a[s1] * b0, d1 += a[s1] * b1;
    c2 += a[s2] * b0, d2 += a[s2] * b1;
    c3 += a[s3] * b0, d3 += a[s3] * b1;
  }
  v4d *rows[4][2] = {{&c0, &d0}, {&c1, &d1}, {&c2, &d2}, {&c3, &d3}};
  for (int r = 0; r < 4; r++) {
    double *cr = g->C + (i + r) * g->ldc + j;
    *(v4du *)cr = *(v4du *)cr + *rows[r][0];
    *(v4du *)(cr + 4) = *(v4du *)(cr + 4) + *rows[r][1];
  }
}

#if defined(__x86_64__)
/* a 6 x 8 tile with FMA: 12 accumulators, two B vectors and a broadcast fill the 16 ymm registers */
__attribute__((target("avx2,fma"))) static void dg_tile_avx2(const dg_args *g, int64_t i, int64_t j, int64_t k0,
                                                             int64_t kn, const double *b, int64_t bs) {
  __m256d c0 = _mm256_setzero_pd(), d0 = c0, c1 = c0, d1 = c0, c2 = c0, d2 = c0, c3 = c0, d3 = c0, c4 = c0, d4 = c0,
          c5 = c0, d5 = c0;
  const double *a = g->A + i * g->sam + k0 * g->sak;
  const int64_t sm = g->sam, sk = g->sak;
  for (int64_t k = 0; k < kn; k++, a += sk, b += bs) {
    __m256d b0 = _mm256_loadu_pd(b), b1 = _mm256_loadu_pd(b + 4), x;
#define DG_ROW(r, c, d) x = _mm256_broadcast_sd(a + (r) * sm), c = _mm256_fmadd_pd(x, b0, c), d = _mm256_fmadd_pd(x, b1, d)
    DG_ROW(0, c0, d0);
    DG_ROW(1, c1, d1);
    DG_ROW(2, c2, d2);
    DG_ROW(3, c3, d3);
    DG_ROW(4, c4, d4);
    DG_ROW(5, c5, d5);
#undef DG_ROW
  }
  __m256d acc[6][2] = {{c0, d0}, {c1, d1}, {c2, d2}, {c3, d3}, {c4, d4}, {c5, d5}};
  for (int r = 0; r < 6; r++) {
    double *cr = g->C + (i + r) * g->ldc + j;
    _mm256_storeu_pd(cr, _mm256_add_pd(_mm256_loadu_pd(cr), acc[r][0]));
    _mm256_storeu_pd(cr + 4, _mm256_add_pd(_mm256_loadu_pd(cr + 4), acc[r][1]));
  }
}
#endif

/* a partial tile at the edges: rows [i, i1), columns [j, j1) */
static void dg_edge(const dg_args *g, int64_t i, int64_t i1, int64_t j, int64_t j1, int64_t k0, int64_t kn) {
  for (int64_t r = i; r < i1; r++)
    for (int64_t n = j; n < j1; n++) {
      double acc = 0;
      const double *a = g->A + r * g->sam + k0 * g->sak, *b = g->B + k0 * g->sbk + n * g->sbn;
      for (int64_t k = 0; k < kn; k++) acc += a[k * g->sak] * b[k * g->sbk];
      g->C[r * g->ldc + n] += acc;
    }
}

/* b: B[k0][j], the next k bs doubles on */
typedef void (*dg_tile_fn)(const dg_args *g, int64_t i, int64_t j, int64_t k0, int64_t kn, const double *b, int64_t bs);

/* the tile this CPU runs, and its rows */
static dg_tile_fn dg_pick(int *mr) {
#if defined(__x86_64__)
  if (primc_isa_covers(primc_sgemm_isa(), PRIMC_ISA_AVX2)) return *mr = 6, dg_tile_avx2;
#endif
  return *mr = 4, dg_tile_any;
}

/* rows [m0, m1) of C, in tiles of mr rows. Each block of B is first copied into panels of 8 columns, k after
 * k (from B or B^T alike): read in place, rows a power of two apart fall into a few L1 sets. Without memory
 * for the copy, B is read in place (B^T element by element). */
static void dg_rows(const dg_args *g, int64_t m0, int64_t m1) {
  int mr;
  dg_tile_fn tile = dg_pick(&mr);
  double *panel = malloc(sizeof(double) * DG_KC * DG_NC);
  for (int64_t r = m0; r < m1; r++) memset(g->C + r * g->ldc, 0, sizeof(double) * (size_t)g->N);
  for (int64_t jc = 0; jc < g->N; jc += DG_NC) {
    int64_t j1 = jc + DG_NC < g->N ? jc + DG_NC : g->N, jfull = jc + (j1 - jc) / DG_NR * DG_NR;
    for (int64_t kc = 0; kc < g->K; kc += DG_KC) {
      int64_t kn = kc + DG_KC < g->K ? DG_KC : g->K - kc;
      for (int64_t j = jc; panel && j < jfull; j += DG_NR)
        for (int64_t k = 0; k < kn; k++) {
          const double *src = g->B + (kc + k) * g->sbk + j * g->sbn;
          double *dst = panel + (j - jc) * kn + k * DG_NR;
          if (g->sbn == 1) memcpy(dst, src, sizeof(double) * DG_NR);
          else for (int n = 0; n < DG_NR; n++) dst[n] = src[n * g->sbn];
        }
      for (int64_t i = m0; i < m1; i += mr)
        for (int64_t j = jc; j < j1; j += DG_NR) {
          if (i + mr <= m1 && j < jfull && (panel || g->sbn == 1))
            tile(g, i, j, kc, kn, panel ? panel + (j - jc) * kn : g->B + kc * g->sbk + j, panel ? DG_NR : g->sbk);
          else dg_edge(g, i, i + mr < m1 ? i + mr : m1, j, j + DG_NR < j1 ? j + DG_NR : j1, kc, kn);
        }
    }
  }
  free(panel);
}

/* strips of DG_STRIP rows (a multiple of both tiles' rows), as primc_parallel_for hands them out */
static void dg_strips(void *ctx, int64_t b, int64_t e) {
  const dg_args *g = ctx;
  dg_rows(g, b * DG_STRIP, e * DG_STRIP < g->M ? e * DG_STRIP : g->M);
}

int primc_dgemm(int trans_a, int trans_b, int64_t M, int64_t N, int64_t K, const double *A, int64_t lda,
                const double *B, int64_t ldb, double *C, int64_t ldc) {
  if (M <= 0 || N <= 0) return PRIMC_OK;
  dg_args g = {M, N, K, A, trans_a ? 1 : lda, trans_a ? lda : 1, B, trans_b ? 1 : ldb, trans_b ? ldb : 1, C, ldc};
  int64_t strips = (M + DG_STRIP - 1) / DG_STRIP;
  if ((double)M * (double)N * (double)K >= DG_SPLIT_FLOPS && strips > 1) primc_parallel_for(strips, dg_strips, &g);
  else dg_strips(&g, 0, strips);
  return PRIMC_OK;
}
